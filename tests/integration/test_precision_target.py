"""``measure.target_rel_ci`` for real at np=2: the ranks sum each block and stop together, the
record holds the blocks and the interval, and the report prints it (hvdscale.train.blocks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
SMALL = ["measure.warmup_steps=1", "data.synthetic.sentences_per_rank=64",
         "measure.block_steps=2"]

pytestmark = pytest.mark.slow


def _run(out: Path, *sets: str) -> dict:
    args = [a for s in (*SMALL, *sets) for a in ("--set", s)]
    r = subprocess.run(["mpirun", "-np", "2", "--bind-to", "none", sys.executable, "-m",
                        "hvdscale", "run", "configs/demo.yaml", *args, "--out", str(out),
                        "--quiet"], cwd=ROOT, env=ENV, capture_output=True, text=True,
                       timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads((out / "results.jsonl").read_text().splitlines()[-1])


def test_a_loose_target_stops_after_three_blocks_on_both_ranks(tmp_path: Path) -> None:
    rec = _run(tmp_path, "measure.target_rel_ci=0.9")
    iv = rec["interval"]
    assert iv["met"] and iv["stopped"] == "target met" and len(iv["blocks"]) == 3
    assert rec["measure"]["steps"] == 6 and len(rec["fingerprints"]) == 2
    # The blocks' words are both ranks' real tokens: together, the record's words.
    assert sum(b["words"] for b in iv["blocks"]) == rec["words"]
    assert iv["words_per_s"] == pytest.approx(rec["words_per_s"], rel=0.05)
    r = subprocess.run([sys.executable, "-m", "hvdscale", "report", str(tmp_path)], cwd=ROOT,
                       env=ENV, capture_output=True, text=True, timeout=120)
    assert f"{rec['words_per_s']:.1f} +-{100 * iv['rel_ci95']:.1f}%" in r.stdout, r.stdout


def test_a_target_out_of_reach_stops_at_max_seconds_and_says_so(tmp_path: Path) -> None:
    rec = _run(tmp_path, "measure.target_rel_ci=0.000001", "measure.max_seconds=1.5")
    iv = rec["interval"]
    assert not iv["met"] and iv["stopped"] == "max_seconds"
    assert 1.5 <= sum(b["seconds"] for b in iv["blocks"]) < 10
    assert rec["measure"]["steps"] == 2 * len(iv["blocks"])
