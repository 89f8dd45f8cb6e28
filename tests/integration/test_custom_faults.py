"""A custom model that breaks the contract ends the whole job before any rank trains: one
message, non-zero exit, no traceback, under ``mpirun -np 2`` for real, also when only rank 1's
model is broken (its builder reads OMPI_COMM_WORLD_RANK)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILDERS = ROOT / "tests" / "data" / "custom_models"
ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
       "TF_CPP_MIN_LOG_LEVEL": "2"}
PROMPT_S = 60
"""Well below the 120 s a hung rank would take to hit the launch's timeout."""


def _run(tmp_path: Path, builder: str) -> tuple[subprocess.CompletedProcess, float]:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"""framework: torch
model: {{kind: custom, task: lm, builder: "{builder}", builder_path: "{BUILDERS}",
        embed_dim: 8, hidden_size: 8, src_vocab: 30}}
data: {{batch_size: 4, synthetic: {{sentences_per_rank: 32, max_len: 10, mean_len: 5}}}}
measure: {{warmup_steps: 1, steps: 2}}
threads: {{intra_op: 1, inter_op: 1}}
""")
    t = time.monotonic()
    r = subprocess.run(["mpirun", "-np", "2", sys.executable, "-m", "hvdscale", "run", str(cfg),
                        "--out", str(tmp_path / "out")], cwd=tmp_path, env=ENV,
                       capture_output=True, text=True, timeout=120)
    return r, time.monotonic() - t


@pytest.mark.parametrize("builder,rank,message", [
    ("custom_torch:rank1_shapes", 0,
     "built different parameter shapes on rank 1 than on rank 0 \\(parameter 0: embed.weight "
     "\\[30, 9\\] against embed.weight \\[30, 8\\]\\)"),
    ("custom_torch:rank1_matrix_loss", 1, "loss must be a float scalar tensor"),
    ("broken_import:build", 0, "cannot be imported: ModuleNotFoundError"),
], ids=["shapes-on-rank-1", "loss-on-rank-1", "import-everywhere"])
def test_a_broken_contract_ends_every_rank_with_one_message(tmp_path, builder, rank,
                                                            message) -> None:
    r, took = _run(tmp_path, builder)
    err = r.stderr
    assert r.returncode != 0, err
    lines = [ln for ln in err.splitlines() if ln.startswith("hvdscale: error")]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"hvdscale: error (rank {rank}): model.builder '{builder}'"), err
    assert re.search(message, lines[0]), err
    assert "Traceback" not in err and took < PROMPT_S, (took, err)
    assert not (tmp_path / "out" / "results.jsonl").exists()  # nothing trained, no record
