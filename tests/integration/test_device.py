"""The runner's device handling in a real (single-process) run: the record says where it ran,
and the adapter is synchronised at every point where the measured timing reads the clock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}

# Records "sync" when the runner itself (not the adapter) synchronises, and "open"/"end"/
# "close" when the meter reads the clock; every clock read must follow a sync.
_PROBE = """
import json, sys
from hvdscale.train import runner
from hvdscale.config import load_config
from hvdscale.frameworks.torch import TorchAdapter
from hvdscale.core.meter import StepMeter

events = []
orig_sync = TorchAdapter.synchronize
def sync(self):
    if sys._getframe(1).f_code.co_name in ("_open_window", "_step", "_close_window"):
        events.append("sync")
    return orig_sync(self)
TorchAdapter.synchronize = sync
for name, tag in (("open_window", "open"), ("end_step", "end"), ("close_window", "close")):
    def wrap(f, tag=tag):
        def inner(*a, **k):
            events.append(tag)
            return f(*a, **k)
        return inner
    setattr(StepMeter, name, wrap(getattr(StepMeter, name)))
cfg = load_config("configs/demo.yaml", sys.argv[2:])
runner.run(cfg, sys.argv[1])
print("EVENTS " + json.dumps(events), flush=True)
"""


def test_auto_runs_on_cpu_and_syncs_before_every_clock_read(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path), "measure.warmup_steps=2",
                        "measure.steps=3", "data.synthetic.sentences_per_rank=64",
                        "strategy.name=independent"],
                       cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    (line,) = [x for x in r.stdout.splitlines() if x.startswith("EVENTS ")]
    events = json.loads(line[7:])
    clock = [i for i, e in enumerate(events) if e != "sync"]
    assert [events[i] for i in clock] == ["end"] * 2 + ["open"] + ["end"] * 3 + ["close"]
    for i in clock:
        assert events[i - 1] == "sync", events
    (rec,) = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    dev = rec["device"]
    assert dev["requested"] == "auto" and dev["gpu"] is None
    assert [p["name"] for p in dev["per_rank"]] == ["cpu"]
    assert dev["per_rank"][0]["shared_by"] == 1 and dev["per_rank"][0]["peak_gpu_mem_mb"] is None
    assert rec["memory"][0]["peak_gpu_mem_mb"] is None


def test_gpu_check_fails_clearly_without_a_gpu(tmp_path: Path) -> None:
    out = tmp_path / "gpu.json"
    r = subprocess.run(["bash", "evidence/gpu_check.sh", "--out", str(out)], cwd=ROOT,
                       env={**ENV, "PYTHON": sys.executable}, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "gpu_check: ERROR: no GPU visible to torch" in r.stderr
    assert "CUDA_VISIBLE_DEVICES=" in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()
