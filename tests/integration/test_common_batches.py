"""Common random numbers, for real: at one rank count every series trains on the same sequence
of batches (``hvdscale.train.rank_data``: a rank's shard and plan follow from the data settings
and its worker index, never from the strategy), so their blocks pair (issue 62). One sweep at
np=2 under mpirun, three strategies in one launch; every record's raw words per step, per rank,
must be the same list."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hvdscale.records.run import RunRecord
from hvdscale.records.store import read_records
from hvdscale.study.verdict.crn import block_ratio, same_batches

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
       "TF_CPP_MIN_LOG_LEVEL": "2", "OMP_NUM_THREADS": "1"}

pytestmark = pytest.mark.slow


def test_every_strategy_at_a_rank_count_trains_on_the_same_batches(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "hvdscale", "sweep", str(ROOT / "configs/demo.yaml"),
                        "--np", "2", "--frameworks", "torch", "--strategies",
                        "horovod,ddp,independent", "--set", "measure.warmup_steps=1",
                        "--set", "measure.steps=9", "--set", "data.synthetic.max_len=20",
                        "--no-plot", "--out", str(out)], env=ENV, capture_output=True,
                       text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    recs = [x for x in read_records(out) if isinstance(x, RunRecord)]
    assert sorted(x.strategy_name for x in recs) == ["ddp", "horovod", "independent"]
    first = recs[0]
    assert first.raw is not None and len(first.raw.words) == 2 and len(first.raw.words[0]) == 9
    assert len({w for ws in first.raw.words for w in ws}) > 1  # sentences of several lengths
    assert all(same_batches(first, x) for x in recs[1:])
    assert block_ratio(recs[0], recs[1], 3).blocks == 3
