"""tests/mpi_ddp runs on every rank under mpirun or srun (DDP needs an MPI launch: its
rendezvous is agreed over MPI); the harness (per-rank junit, hang timeout, cross-rank failures)
lives in tests/mpi_harness.py. Nothing here starts Horovod."""

import os

# The session's tag in junit and hang-log names (tests/mpi_harness.py reads it at import), so
# these launches do not overwrite tests/mpi's files of the same launcher and size.
os.environ["HVDSCALE_TEST_FRAMEWORK"] = "ddp"

from tests.mpi_harness import (  # noqa: F401  (pytest finds hooks and fixtures by name)
    _hang_timeout,
    comm_world,
    pytest_configure,
    pytest_runtest_makereport,
)
