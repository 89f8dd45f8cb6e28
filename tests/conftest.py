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
import os
import shutil
import tempfile
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


@pytest.fixture(scope="session", autouse=True)
def _builds_go_to_scratch() -> Iterator[None]:
    """What the tests build (the offline bundle's Horovod wheel and its build venv) and what
    pip downloads for them go to a folder of this session's own, removed at its end: never
    into the user's ~/.cache/hvdscale (issue 49). tests/run.sh sets its own scratch folder for
    every phase; HVDSCALE_TEST_CACHE=DIR keeps the builds in DIR between runs instead."""
    keep = os.environ.get("HVDSCALE_TEST_CACHE")
    if keep or os.environ.get("HVDSCALE_CACHE", "").startswith(tempfile.gettempdir()):
        if keep:
            os.environ["HVDSCALE_CACHE"] = keep
        yield
        return
    scratch = tempfile.mkdtemp(prefix="hvs-test-cache-")
    saved = {k: os.environ.get(k) for k in ("HVDSCALE_CACHE", "PIP_CACHE_DIR")}
    os.environ.update(HVDSCALE_CACHE=f"{scratch}/cache", PIP_CACHE_DIR=f"{scratch}/pip")
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(scratch, ignore_errors=True)


# Issue 49: tests/run.sh runs the single phase on two pytest workers (pytest-xdist, ``-n 2
# --dist loadgroup --no-loadscope-reorder``): about half its wall time is spent waiting
# (launches starting, deadlines met, daemons), so a second worker fills the idle core. A module
# runs whole on one worker (its module fixtures are built once); modules that share one build
# share a group. The longest groups start first, so neither worker is left with a long tail.
_SHARED_GROUP = {"test_first_contact": "offline-bundle", "test_offline_bundle": "offline-bundle"}
"""Modules that must run on one worker: both build the offline bundle's Horovod wheel into the
same $HVDSCALE_CACHE/wheels (the second one uses the first one's)."""
_LONG_FIRST = ("offline-bundle", "tests/integration/test_faults.py")
"""Groups started first, longest first (tests/run.sh's junit: 700 s and 500 s of 2,200)."""


def _group(item: pytest.Item) -> str:
    path = item.nodeid.split("::", 1)[0]
    return _SHARED_GROUP.get(path.rsplit("/", 1)[-1].removesuffix(".py"), path)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist: one group per module (shared where a build is shared), long groups first."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_group(item)))
    order = {g: i for i, g in enumerate(_LONG_FIRST)}
    items.sort(key=lambda i: order.get(_group(i), len(order)))  # stable: the rest as collected
