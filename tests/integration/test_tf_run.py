"""TensorFlow runs through the command line, as a user launches them, and the framework seam:
a TensorFlow run never imports torch and a PyTorch run never imports tensorflow (checked in
the rank processes themselves)."""

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
TINY = ["--set", "measure.warmup_steps=1", "--set", "measure.steps=3",
        "--set", "data.synthetic.sentences_per_rank=64"]
MPIRUN = ["mpirun", "-np", "2", "--bind-to", "none"]


def _run(cmd: list[str], timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True,
                          timeout=timeout)


def _records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("launcher,strategy", [
    ("mpirun", "horovod"), ("mpirun", "ps"), ("mpirun", "independent"),
    ("horovodrun-gloo", "horovod"),
])
def test_tf_run_records_like_torch(launcher: str, strategy: str, tmp_path: Path) -> None:
    cmd = MPIRUN if launcher == "mpirun" else ["horovodrun", "-np", "2", "--gloo"]
    r = _run([*cmd, "hvdscale", "run", "configs/demo.yaml", "--out", str(tmp_path),
              "--set", "framework=tf", "--set", f"strategy.name={strategy}", *TINY])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    (rec,) = _records(tmp_path)
    assert rec["status"] == "ok" and rec["ranks"] == 2
    assert rec["config"]["framework"] == "tf" and rec["key"]["framework"] == "tf"
    assert rec["words"] > 0 and rec["words_per_s"] > 0 and rec["final_loss"] > 0
    assert rec["threads"]["intra_op"] == 1
    fps = rec["fingerprints"]
    if strategy == "independent":
        assert fps[0] != fps[1]
    else:
        assert fps[0] == fps[1], "synchronous replicas must end identical"
    # No TensorFlow start-up chatter from the ranks (TF_CPP_MIN_LOG_LEVEL kept at 2).
    # horovodrun's launcher process imports tensorflow itself and prints it; its own lines
    # carry no "[rank]<stderr>:" tag, so only the ranks' lines are judged there.
    ranks_err = r.stderr if launcher == "mpirun" else "\n".join(
        ln for ln in r.stdout.splitlines() + r.stderr.splitlines() if ">:" in ln[:16])
    assert "oneDNN custom operations" not in ranks_err and "absl::InitializeLog" not in ranks_err


_PROBE = """
import json, sys
from hvdscale.config import load_config
from hvdscale.train import runner
cfg = load_config("configs/demo.yaml", sys.argv[2:])
runner.run(cfg, sys.argv[1])
mods = sorted({m.split(".")[0] for m in sys.modules} & {"torch", "tensorflow", "keras"})
print("MODULES " + json.dumps(mods), flush=True)
"""


@pytest.mark.parametrize("framework,strategy,forbidden", [
    ("tf", "horovod", "torch"), ("tf", "ps", "torch"),
    ("torch", "horovod", "tensorflow"), ("torch", "ps", "tensorflow"),
])
def test_a_run_imports_only_its_own_framework(framework: str, strategy: str, forbidden: str,
                                              tmp_path: Path) -> None:
    r = _run([*MPIRUN, sys.executable, "-c", _PROBE, str(tmp_path), f"framework={framework}",
              f"strategy.name={strategy}", "measure.warmup_steps=1", "measure.steps=2",
              "data.synthetic.sentences_per_rank=64"])
    assert r.returncode == 0, r.stderr[-3000:]
    seen = [json.loads(line.split(" ", 1)[1]) for line in r.stdout.splitlines()
            if line.startswith("MODULES ")]
    assert len(seen) == 2, r.stdout  # both ranks answered
    for mods in seen:
        assert forbidden not in mods, f"a {framework} run imported {forbidden}: {mods}"
        assert ("tensorflow" if framework == "tf" else "torch") in mods


def test_every_shipped_config_takes_framework_tf() -> None:
    from hvdscale.config import load_config

    for path in sorted((ROOT / "configs").glob("*.yaml")):
        assert load_config(path, ["framework=tf"]).framework == "tf", path
