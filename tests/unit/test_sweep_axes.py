"""``hvdscale sweep --axis``: any config key is an axis of the grid, several make a product,
``--scale-lr`` is one more; ``--dry-run`` prints the grid; and a fusion grid run as a plain
sweep is what ``hvdscale fusion`` runs (fusion is the one driver plus its analysis): fusion
then finds every point recorded, launches nothing, and gives the figures and recommendation it
gives when it launches the grid itself.

The launcher is a stand-in ``mpirun`` on PATH that appends the record a point's rank 0 would
write, its words/s set by the point's fusion threshold and round (the real launches are
tests/integration/test_fusion.py's).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from hvdscale.errors import HvdscaleError
from hvdscale.study.fusion.horovod import FusionGrid, plan_fusion, run_fusion
from hvdscale.study.sweep.driver import dry_run, run_sweep
from hvdscale.study.sweep.plan import SweepRequest, plan_sweep
from tests.records_fixture import run_dict

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "demo.yaml"
FUSION_AXES = ["strategy.horovod.fusion_threshold_mb=0,128", "strategy.horovod.cycle_time_ms=1",
               "strategy.horovod.overlap=hooks"]

FAKE_MPIRUN = """#!{python}
import json, sys
argv = sys.argv[1:]
sets = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
value = lambda key: [s.split("=", 1)[1] for s in sets if s.startswith(key + "=")][-1]
names = [s.split("=", 1)[1] for s in sets if s.startswith("name=")]
out = argv[argv.index("--out") + 1]
threshold = float(value("strategy.horovod.fusion_threshold_mb"))
rec = json.load(open({templates!r}))[f"{{threshold:g}}"]
rec["config"]["name"] = rec["name"] = names[-1] if names else rec["name"]
rnd = int(rec["name"].rsplit("round", 1)[1]) if "-round" in rec["name"] else 1
rec["words_per_s"] = (1000.0 + 2 * threshold) * (1 + 0.01 * rnd)
with open({log!r}, "a") as f:
    f.write(rec["name"] + " " + str(threshold) + "\\n")
with open(out + "/results.jsonl", "a") as f:
    f.write(json.dumps(rec) + "\\n")
"""


def _sweep(out: Path, axes: list[str], repeats: int = 1, strategies: str = "horovod",
           **kw: object):
    return plan_sweep(SweepRequest(CONFIG, "2", strategies, out=out, repeats=repeats,
                                   axes=axes, **kw), env=dict(os.environ), check_out=False)


def test_axes_make_a_product_of_config_keys_named_in_each_point() -> None:
    spec = _sweep(ROOT / "unused", ["strategy.horovod.fusion_threshold_mb=0,32,128",
                                    "strategy.horovod.cycle_time_ms=1,5"])
    assert len(spec.points) == 6
    assert [p.cfg.strategy.horovod.fusion_threshold_mb for p in spec.points] == \
        [0, 0, 32, 32, 128, 128]
    assert [p.cfg.strategy.horovod.cycle_time_ms for p in spec.points] == [1, 5] * 3
    assert spec.points[3].name == "horovod fusion_threshold_mb=32 cycle_time_ms=5"
    assert spec.points[3].sets == ("strategy.horovod.fusion_threshold_mb=32",
                                   "strategy.horovod.cycle_time_ms=5")
    # DDP's bucket size is an axis like any other; --scale-lr is the axis optim.scale_lr.
    ddp = _sweep(ROOT / "unused", ["strategy.ddp.bucket_cap_mb=1,25"], strategies="ddp")
    assert [p.cfg.strategy.ddp.bucket_cap_mb for p in ddp.points] == [1, 25]
    lr = _sweep(ROOT / "unused", [], scale_lr="none,sqrt", overrides=["data.scaling=weak"])
    assert [p.name for p in lr.points] == ["horovod scale_lr=none", "horovod scale_lr=sqrt"]


@pytest.mark.parametrize("axis,says", [
    ("strategy.horovod.fusion_threshold_mb", "--axis needs KEY=VALUE"),
    ("strategy.horovod.bogus=1", "unknown config key 'strategy.horovod.bogus'"),
    ("strategy.horovod.fusion_threshold_mb=-1", "fusion_threshold_mb"),
    ("framework=torch,tf", "use --frameworks"),
])
def test_a_bad_axis_is_one_clear_error_before_any_launch(axis: str, says: str) -> None:
    with pytest.raises(HvdscaleError, match=says) as e:
        _sweep(ROOT / "unused", [axis])
    assert "\n" not in str(e.value)


def test_the_dry_run_prints_the_grid_and_each_launch() -> None:
    said: list[str] = []
    dry_run(_sweep(ROOT / "unused", FUSION_AXES, repeats=2), said.append)
    assert said[0] == ("grid: np 2 x (framework, strategy) torch:horovod x "
                       "strategy.horovod.fusion_threshold_mb 0,128 x "
                       "strategy.horovod.cycle_time_ms 1 x strategy.horovod.overlap hooks = "
                       "2 points x 2 round(s), 4 launches")
    assert len([s for s in said if s.startswith("[launch ")]) == 4


def _fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, points: list) -> Path:
    templates = {f"{p.cfg.strategy.horovod.fusion_threshold_mb:g}":
                 run_dict(cfg=p.cfg, ranks=2, workers=2) for p in points}
    (tmp_path / "templates.json").write_text(json.dumps(templates))
    log, bindir = tmp_path / "launches.log", tmp_path / "bin"
    bindir.mkdir()
    (bindir / "mpirun").write_text(FAKE_MPIRUN.format(
        python=sys.executable, templates=str(tmp_path / "templates.json"), log=str(log)))
    (bindir / "mpirun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    return log


def test_a_fusion_grid_as_a_plain_sweep_is_what_hvdscale_fusion_measures(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain, own = tmp_path / "plain", tmp_path / "fusion"
    plain.mkdir(), own.mkdir()
    grid = FusionGrid(2, "0,128", "1", "hooks", repeats=3, timeline_steps=0, autotune=False,
                      independent=False)
    sweep = _sweep(plain, FUSION_AXES, repeats=3)
    log = _fake(tmp_path, monkeypatch, list(sweep.points))
    assert all(o.status == "ok" for o in run_sweep(sweep, print).outcomes)
    launched = log.read_text()
    assert len(launched.splitlines()) == 6
    # hvdscale fusion on the plain sweep's results: every point recorded, nothing launched.
    said: list[str] = []
    from_sweep = run_fusion(plan_fusion(CONFIG, grid, plain, check_out=False), said.append)
    assert log.read_text() == launched
    assert sum("skipped, already recorded" in s for s in said) == 6, said
    # hvdscale fusion launching the grid itself: the same figures and recommendation.
    itself = run_fusion(plan_fusion(CONFIG, grid, own, check_out=False), print)
    assert len(log.read_text().splitlines()) == 12
    assert from_sweep["table"] == itself["table"]
    assert from_sweep["recommendation"] == itself["recommendation"]
    assert [r["words_per_s"] for r in itself["table"]] == pytest.approx([1020.0, 1256.0 * 1.02])
    assert itself["recommendation"]["reference"] == "128MB/1ms/hooks"
