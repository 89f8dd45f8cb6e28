"""``hvdscale sweep``'s launch per round: which points share a launch, in which order, what a
launch that ends early leaves to a fresh one, and what a plan says.

The launcher is a stand-in ``mpirun`` on PATH that does what ``hvdscale run-points`` does with
a plan, without training: for each point it appends the state line, the record rank 0 would
write (tagged with its place in the launch) and the end line; told to, it stops dead inside one
point (a rank lost). The real launches are tests/integration/test_shared_launch.py's.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hvdscale.records.failed import FailedRecord
from hvdscale.records.store import read_records
from hvdscale.study.sweep.cost import sweep_cost
from hvdscale.study.sweep.driver import dry_run, run_sweep
from hvdscale.study.sweep.groups import all_launches, round_launches
from hvdscale.study.sweep.plan import SweepRequest, SweepSpec, default_overrides, plan_sweep
from hvdscale.train.points import read_plan
from tests.unit import fake_mpirun as fake

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "demo.yaml"

FAKE_MPIRUN = """#!{python}
import json, os, sys, time
argv = sys.argv[1:]
np = int(argv[argv.index("-np") + 1])
plan = json.load(open(argv[argv.index("run-points") + 1]))
out = argv[argv.index("--out") + 1]
templates = json.load(open({templates!r}))
die = os.environ.get("FAKE_DIE_AT", "")
with open({log!r}, "a") as f:
    f.write(plan["launch"] + "\\n")
for k, p in enumerate(plan["points"]):
    value = lambda key: [s.split("=", 1)[1] for s in p["sets"] if s.startswith(key + "=")][-1]
    with open(plan["state"], "a") as f:
        f.write(json.dumps({{"kind": "point_state", "at": time.time(), "position": k,
                            "event": "start"}}) + "\\n")
    if die and die in p["label"] and not os.path.exists({died!r}):
        open({died!r}, "w").close()
        sys.stderr.write("a rank was lost\\n")
        sys.exit(9)
    rec = dict(templates[f"{{value('strategy.name')}} {{np}}"])
    names = [s.split("=", 1)[1] for s in p["sets"] if s.startswith("name=")]
    rec["config"] = dict(rec["config"], name=names[-1] if names else rec["name"])
    rec["name"] = rec["config"]["name"]
    rec["launch"] = {{"id": plan["launch"], "position": k, "after": [], "shared": True}}
    with open(out + "/results.jsonl", "a") as f:
        f.write(json.dumps(rec) + "\\n")
    with open(plan["state"], "a") as f:
        f.write(json.dumps({{"kind": "point_state", "at": time.time(), "position": k,
                            "event": "end"}}) + "\\n")
"""


def _plan(tmp_path: Path, repeats: int = 1, strategies: str = "horovod,ps,independent",
          **kw: object) -> SweepSpec:
    return plan_sweep(SweepRequest(CONFIG, "1,2", strategies, out=tmp_path / "out",
                                   repeats=repeats, **kw), env=dict(os.environ), check_out=False)


@pytest.fixture
def fake_mpirun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return fake.install(tmp_path, monkeypatch, _plan(tmp_path), FAKE_MPIRUN)


def test_one_launch_per_round_and_rank_count_in_rotated_order(tmp_path: Path,
                                                             fake_mpirun: Path) -> None:
    spec = _plan(tmp_path, repeats=3)
    plan = all_launches(list(spec.points), 3)
    assert [(x.round, x.ranks, len(x.points)) for x in plan] == [
        (r, n, 3) for r in range(3) for n in (1, 2)]
    orders = [[p.strategy for p in x.points] for x in plan if x.ranks == 2]
    # Rotated by one point per round: none always first, none always after the same one.
    assert orders == [["horovod", "ps", "independent"], ["ps", "independent", "horovod"],
                      ["independent", "horovod", "ps"]]
    said: list[str] = []
    result = run_sweep(spec, say=said.append)
    assert [o.status for o in result.outcomes] == ["ok"] * 18
    assert len(fake_mpirun.read_text().splitlines()) == 6  # 2 rank counts x 3 rounds
    recs = read_records(spec.out)
    assert [r.launch.position for r in recs] == [0, 1, 2] * 6
    progress = [s for s in said if ": ok " in s]
    assert progress[0].startswith("[1/18] round 1/3 torch horovod np=1: ok 100.0 words/s in ")
    assert progress[6].startswith("[7/18] round 2/3 torch ps np=1: ok")
    # Every point of a shared launch has its timing line, naming its launch and place in it.
    timing = [json.loads(x) for x in (spec.out / "sweep_timing.jsonl").read_text().splitlines()]
    assert len(timing) == 18 and {t["position"] for t in timing} == {0, 1, 2}
    assert len({t["launch"] for t in timing}) == 6
    # What the sweep cost counts each shared launch once, whatever number of points it ran.
    cost = sweep_cost(recs, spec.out)
    assert cost is not None and (cost.launches, cost.points) == (6, 18)
    per_launch = {t["launch"]: t["launch_s"] for t in timing}
    assert cost.launch_s == pytest.approx(sum(per_launch.values()))
    # A rerun launches nothing.
    assert all(o.status == "skipped" for o in run_sweep(spec, say=print).outcomes)
    assert len(fake_mpirun.read_text().splitlines()) == 6


def test_a_launch_that_ends_inside_a_point_runs_the_rest_in_a_fresh_one(
        tmp_path: Path, fake_mpirun: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_DIE_AT", "ps np=2")
    spec = _plan(tmp_path)
    said: list[str] = []
    result = run_sweep(spec, say=said.append)
    by = {(o.point.strategy, o.point.ranks): o for o in result.outcomes}
    assert by[("ps", 2)].status == "failed" and "a rank was lost" in by[("ps", 2)].error
    assert by[("ps", 2)].error.startswith("exit 9: ")
    assert all(o.status == "ok" for k, o in by.items() if k != ("ps", 2))
    launches = fake_mpirun.read_text().splitlines()
    assert len(launches) == 3 and launches[2].endswith("_2")  # np=1, np=2, np=2 again
    assert any("running them in a fresh launch" in s and "torch independent np=2" in s
               for s in said), said
    failed = [r for r in read_records(spec.out) if isinstance(r, FailedRecord)]
    assert len(failed) == 1 and failed[0].launch.position == 1
    assert failed[0].strategy_name == "ps"


def test_mwms_and_launch_per_point_get_launches_of_their_own(tmp_path: Path) -> None:
    spec = _plan(tmp_path, strategies="horovod,mwms,independent",
                 overrides=["framework=tf"])
    launches = round_launches(list(spec.points), 0)
    alone = [x for x in launches if not x.shared]
    assert [(x.points[0].strategy, x.ranks) for x in alone] == [("mwms", 1), ("mwms", 2)]
    assert "set up once per process" in alone[0].alone
    assert [len(x.points) for x in launches if x.shared] == [2, 2]
    every = round_launches(list(spec.points), 0, per_point=True)
    assert len(every) == 6 and {x.alone for x in every} == {"--launch-per-point"}
    said: list[str] = []
    dry_run(spec, say=said.append)
    heads = [s for s in said if s.startswith("[launch ")]
    assert len(heads) == 4 and "2 points in one launch" in heads[0]
    assert "a launch of its own: TensorFlow's MultiWorkerMirroredStrategy" in heads[1]


def test_the_plan_a_launch_reads_is_checked(tmp_path: Path) -> None:
    from hvdscale.errors import HvdscaleError

    bad = tmp_path / "plan.json"
    for text, needle in (("{", "is not a JSON record"),
                         ('{"schema": 9, "kind": "launch_plan"}', "newer hvdscale"),
                         ('{"kind": "launch_plan", "points": []}', "field 'launch'"),
                         ('{"kind": "launch_plan", "launch": "x", "points": [{"label": 1}]}',
                          "field 'points"),
                         ('{"kind": "point_state", "at": 1, "position": 0, "event": "end"}',
                          "one launch_plan record"),
                         ('{"kind": "launch_plan", "launch": "x", "points": []}', "no points")):
        bad.write_text(text)
        with pytest.raises(HvdscaleError, match=needle):
            read_plan(bad)


@pytest.mark.parametrize("yaml_measure,sets,expect", [
    ("", [], True),
    ("measure:\n  warmup_steps: 2\n", [], True),
    ("measure:\n  steps: 5\n", [], False),
    ("", ["measure.steps=4"], False),
    ("", ["measure.target_rel_ci=0.05"], False),
    ("measure:\n  epochs: 1\n", [], False),
])
def test_a_sweep_measures_to_2_percent_unless_the_config_says_how_long(
        tmp_path: Path, yaml_measure: str, sets: list[str], expect: bool) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("name: x\n" + yaml_measure)
    got = default_overrides(cfg, sets)
    assert ("measure.target_rel_ci=0.02" in got) is expect, got
    assert got == (("measure.target_rel_ci=0.02",) if expect else ()) + tuple(sets)


def test_horovod_with_fixed_fusion_or_cycle_settings_runs_alone(tmp_path: Path) -> None:
    # Horovod 0.28 segfaults in hvd.init() when started again in one process after a point
    # that fixed its fusion threshold and cycle time (hvdscale.study.sweep.groups).
    spec = _plan(tmp_path, strategies="horovod,ps,independent",
                 overrides=["strategy.horovod.cycle_time_ms=1"])
    launches = round_launches([p for p in spec.points if p.ranks == 2], 0)
    assert [(x.shared, [p.strategy for p in x.points]) for x in launches] == [
        (False, ["horovod"]), (True, ["ps", "independent"])]
    assert "parameter manager crashes" in launches[0].alone
    plain = _plan(tmp_path)
    assert all(x.shared for x in round_launches(list(plain.points), 0))


def test_a_state_line_not_of_rank_0s_shape_ends_the_reading(tmp_path: Path) -> None:
    from hvdscale.records.point_state import PointState
    from hvdscale.records.store import read_complete_lines

    good = '{"kind": "point_state", "at": 1.0, "position": 0, "event": "start"}\n'
    state = tmp_path / "s.jsonl"
    for bad in ('{"kind": "point_state", "at": "soon", "position": 0, "event": "end"}\n',
                '[1, 2]\n', '{"kind": "point_state", "at": 2.0, "position": "0", '
                '"event": "end"}\n',
                '{"kind": "point_state", "at": 2.0, "position": 0, "event": "done"}\n',
                '{"at": 2.0, "position": 0, "event": "end"}\n',
                '{"kind": "point_state", "at": 2.0, "posi'):
        state.write_text(good + bad + good)
        assert [r.to_dict() for r in read_complete_lines(state, PointState)] == \
            [{**json.loads(good), "schema": 2}], bad
