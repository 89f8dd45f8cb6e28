"""A strategy registered by a test alone (tests/toy_strategy.py, a plugin named in
``HVDSCALE_STRATEGY_PLUGINS``) is a strategy like the built-ins: the config accepts it (and
refuses what it refuses), the sweep plans it in a launch of its own and runs it under mpirun at
np=1 and 2 (``hvdscale run ... --set strategy.name=toy``, 2 ranks that end with the same
parameters), ``hvdscale report`` shows its series and ``hvdscale predict --fit`` fits it with
its own first family. Without the plugin every one of those refuses the name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLAIN = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
         "TF_CPP_MIN_LOG_LEVEL": "2",
         # the ranks import tests.toy_strategy from this checkout
         "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
PLAIN.pop("HVDSCALE_STRATEGY_PLUGINS", None)
TOY = {**PLAIN, "HVDSCALE_STRATEGY_PLUGINS": "tests.toy_strategy"}
TINY = ["--set", "measure.warmup_steps=1", "--set", "measure.steps=3",
        "--set", "data.synthetic.sentences_per_rank=64"]
UNKNOWN = ("strategy.name must be one of horovod, independent, ps, ddp, mwms, or one that a "
           "plugin module named in HVDSCALE_STRATEGY_PLUGINS registers (got 'toy')")
# tests/toy_strategy.py's traits, as its messages say them (importing it here would register
# the toy in this process too)
ALONE = "the toy strategy wants a launch of its own"
REFUSES = "the toy strategy averages fp32 gradients only"

pytestmark = pytest.mark.slow


def hvdscale(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hvdscale", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("toy")
    r = hvdscale("sweep", "configs/demo.yaml", "--np", "1,2", "--strategies", "toy", "--out",
                 str(out), *TINY, env=TOY, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out


def test_the_config_accepts_the_toy_only_with_its_plugin() -> None:
    r = hvdscale("config", "configs/demo.yaml", "--set", "strategy.name=toy", env=TOY)
    assert r.returncode == 0, r.stderr
    assert "  name: toy\n" in r.stdout
    r = hvdscale("config", "configs/demo.yaml", "--set", "strategy.name=toy", "--set",
                 "precision=bf16", env=TOY)
    assert r.returncode != 0 and f"bf16 with strategy.name=toy is refused: {REFUSES}" in r.stderr
    r = hvdscale("config", "configs/demo.yaml", "--set", "strategy.name=toy", env=PLAIN)
    assert r.returncode != 0 and UNKNOWN in r.stderr


def test_the_sweep_gives_the_toy_a_launch_of_its_own(tmp_path: Path) -> None:
    r = hvdscale("sweep", "configs/demo.yaml", "--np", "2", "--strategies", "toy,independent",
                 "--out", str(tmp_path), "--dry-run", env=TOY)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert any(f"torch toy np=2 (a launch of its own: {ALONE})" in ln for ln in lines), lines
    assert any("np=2, 1 points in one launch" in ln for ln in lines), lines  # independent's


def test_the_toy_runs_on_two_ranks_under_mpirun(swept: Path) -> None:
    recs = [json.loads(x) for x in (swept / "results.jsonl").read_text().splitlines()]
    assert sorted((r["key"]["strategy"], r["ranks"], r["status"]) for r in recs) == \
        [("toy", 1, "ok"), ("toy", 2, "ok")]
    two = next(r for r in recs if r["ranks"] == 2)
    assert two["strategy"]["name"] == "toy" and two["words_per_s"] > 0
    a, b = two["fingerprints"]  # one model: the same update on both ranks
    assert a == b
    (log,) = swept.glob("logs/*_toy_np2.stdout")
    head = log.read_text().splitlines()[0]
    assert head.startswith("$ mpirun -np 2 ") and " -m hvdscale run " in head
    assert "strategy.name=toy" in head


def test_the_report_shows_the_toy(swept: Path) -> None:
    r = hvdscale("report", str(swept), env=TOY)
    assert r.returncode == 0, r.stderr
    assert "### torch / fused / toy" in r.stdout
    # the breakdown's row ("toy (busy)" on a loaded host)
    assert "|demo (nmt/torch/fused, weak)|toy" in r.stdout


def test_predict_fits_the_toy_with_its_own_family(swept: Path) -> None:
    r = hvdscale("predict", "configs/demo.yaml", "--fit", str(swept), env=TOY)
    assert r.returncode == 0, r.stderr
    assert "## toy\n- communication: shared-link:" in r.stdout
    # Without its plugin the toy's records are refused in one line naming the file, the field
    # and where a plugin is named: the report and predict need the strategy's traits.
    r = hvdscale("predict", "configs/demo.yaml", "--fit", str(swept), env=PLAIN)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert f"results.jsonl:1: field 'config' of a run record: {UNKNOWN}" in r.stderr
