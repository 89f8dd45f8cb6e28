"""Not collected by the suite (see tests/integration/test_harness.py, which runs it on purpose):
one test passes everywhere, one fails only on rank 1, one hangs only on rank 1."""

from __future__ import annotations

import os
import time


def _rank() -> int:
    return int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("HOROVOD_RANK", "0")))


def test_passes_everywhere() -> None:
    assert True


def test_fails_on_rank_1_only() -> None:
    assert _rank() != 1, "deliberate failure on rank 1"


def test_hangs_on_rank_1_only() -> None:
    if os.environ.get("SELFTEST_HANG") and _rank() == 1:
        time.sleep(3600)


def test_rank_0_fails_before_a_collective_rank_1_reaches(comm_world) -> None:
    # Rank 0 leaves the test early; rank 1 goes on to a collective of the test's own. The
    # harness's exchange of outcomes after the test must not answer it (issue 50: under a
    # mutant that made the parameter server fail on one rank, the ranks' collectives crossed
    # and the job spun for the whole 10-minute limit).
    if not os.environ.get("SELFTEST_CROSS"):
        return
    assert _rank() != 0, "deliberate failure on rank 0 before the collective"
    comm_world.allgather("rank 1's own collective")
