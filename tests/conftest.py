"""A guard for every test: none may leave an MPI launch environment in the pytest process.

Initialising MPI in a process that no launcher started makes Open MPI a singleton, which
``setenv``s its PMIx/ORTE variables in the C environment (not in ``os.environ``). Every
child started afterwards without an explicit ``env`` inherits them, and a launcher started
that way can fail silently (a horovodrun in a network namespace exited 1 with no message,
tests/integration/test_netns.py, long after the test that initialised MPI had passed). A
test that needs a real run starts ``python -m hvdscale run`` as its own process instead.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator

import pytest

from tests.exactness_summary import (  # noqa: F401  (hooks: cases ran per strategy)
    pytest_runtest_logreport,
    pytest_sessionfinish,
    pytest_terminal_summary,
)

# Set by an Open MPI singleton init (and by every launcher); one is enough to tell.
_MARKERS = (b"PMIX_RANK", b"OMPI_MCA_ess", b"PMIX_NAMESPACE")
_libc = ctypes.CDLL(None)
_libc.getenv.restype = ctypes.c_char_p
_libc.getenv.argtypes = [ctypes.c_char_p]


def _launch_vars() -> set[str]:
    """The marker variables present in the C environment now."""
    return {m.decode() for m in _MARKERS if _libc.getenv(m) is not None}


# Under mpirun these are there from the start, and allowed; a leak is reported once, by the
# test that made it.
_KNOWN = _launch_vars()


@pytest.fixture(autouse=True)
def _no_mpi_launch_environment_left() -> Iterator[None]:
    yield
    new = _launch_vars() - _KNOWN
    if new:
        _KNOWN.update(new)
        pytest.fail(f"this test initialised MPI in the pytest process (now set: "
                    f"{', '.join(sorted(new))}); later launchers would inherit the singleton's "
                    f"environment. Run it as its own process (python -m hvdscale run ...).",
                    pytrace=False)
