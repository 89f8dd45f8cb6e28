"""``mpirun --tag-output`` read by tag, not by line (tests/integration/tagged.py): a rank's write
without a newline (pytest's progress dots) glues the other rank's next line onto its own, after
its tag. test_harness read rank 0's lines by their first tag and once missed rank 0's
"failed on rank 1 of 2" that way, in the single phase on two workers (issue 49)."""

from __future__ import annotations

import os
import subprocess

from tests.integration.tagged import by_rank, rank_text

SCRIPT = ('if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then printf dots; sleep 1; echo " end"; '
          'else sleep 0.3; echo "failed on rank 1 of 2"; fi')


def test_a_line_glued_after_another_ranks_chunk_is_still_its_ranks() -> None:
    r = subprocess.run(["mpirun", "-np", "2", "--tag-output", "bash", "-c", SCRIPT],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                       env={**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1",
                            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    assert r.returncode == 0, r.stderr
    glued = [ln for ln in r.stdout.splitlines() if "failed on rank 1 of 2" in ln]
    assert glued and glued[0].startswith("[1,1]"), r.stdout  # the line begins with rank 1's tag
    assert rank_text(r.stdout, 0) == "failed on rank 1 of 2\n"
    assert rank_text(r.stdout, 1) == "dots end\n"
    assert {(rank, stream) for rank, stream, _ in by_rank(r.stdout)} == {(0, "stdout"),
                                                                       (1, "stdout")}
