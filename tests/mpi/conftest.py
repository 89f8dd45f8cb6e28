"""tests/mpi runs on every rank; the harness (per-rank junit, hang timeout, cross-rank
failures) lives in tests/mpi_harness.py."""

from tests.mpi_harness import (  # noqa: F401  (pytest finds hooks and fixtures by name)
    _hang_timeout,
    comm_world,
    hvd,
    needs_mpi,
    pytest_configure,
    pytest_runtest_makereport,
)
