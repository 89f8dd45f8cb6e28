"""``hvdscale run-points`` under ``mpirun -np 2`` given a plan whose first points every rank
refuses (an unknown ``--set`` key, a config file that is not there): each gets a failed record
naming why, in one line per rank and no traceback, and the launch goes on to the next point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
       "TF_CPP_MIN_LOG_LEVEL": "2"}
TINY = ["strategy.name=independent", "measure.warmup_steps=1", "measure.steps=2",
        "data.synthetic.sentences_per_rank=32"]

pytestmark = pytest.mark.slow


def test_refused_points_get_failed_records_and_the_launch_goes_on(tmp_path: Path) -> None:
    demo = str(ROOT / "configs/demo.yaml")
    points = [{"label": "bad key", "config": demo, "sets": [*TINY, "measure.no_such_key=1"]},
              {"label": "no file", "config": str(tmp_path / "missing.yaml"), "sets": TINY},
              {"label": "good", "config": demo, "sets": TINY}]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"kind": "launch_plan", "launch": "refused", "points": points,
                                "state": str(tmp_path / "state.jsonl")}))
    r = subprocess.run(["mpirun", "-np", "2", "--bind-to", "none", sys.executable, "-m",
                        "hvdscale", "run-points", str(plan), "--out", str(tmp_path / "out"),
                        "--quiet"], cwd=ROOT, env=ENV, capture_output=True, text=True,
                       timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    assert "2 of 3 points failed on every rank" in r.stdout
    lines = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    assert [x["kind"] for x in recs] == ["failed", "failed", "run"]
    assert "unknown config key 'measure.no_such_key'" in recs[0]["error"]
    assert "config file not found" in recs[1]["error"]
    assert recs[0]["ranks"] == 2 and len(recs[0]["errors_per_rank"]) == 2
    assert [x["launch"]["position"] for x in recs] == [0, 1, 2]
    for rank in (0, 1):
        assert sum(f"(rank {rank}): point 1 (bad key)" in x for x in r.stderr.splitlines()) == 1
