"""tests/torchrun/ranks runs on every rank under torchrun (tests/run.sh's torchrun phase, with
tests/mpi_ddp's exactness cases); the harness (per-rank junit, hang timeout, cross-rank
failures) is tests/mpi_harness.py's, over a ``TorchWorld`` there."""

import os

os.environ.setdefault("HVDSCALE_TEST_FRAMEWORK", "ddp")  # the junit files' tag, as mpi_ddp's

from tests.mpi_harness import (  # noqa: F401  (pytest finds hooks and fixtures by name)
    _hang_timeout,
    comm_world,
    pytest_configure,
    pytest_runtest_makereport,
)
