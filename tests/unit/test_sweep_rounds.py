"""``hvdscale sweep --repeats``: interleaved rounds in rotated order, each record tagged with its
round, and a rerun that launches only the rounds still missing.

The launcher here is a stand-in ``mpirun`` on PATH that appends the record the point's rank 0
would write (the real launch is tests/integration/test_sweep_noise.py's); what is tested is the
sweep's order and its resumption, which do not depend on what the ranks compute.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hvdscale.errors import HvdscaleError
from hvdscale.records.store import read_records
from hvdscale.study.paired.rounds import round_of
from hvdscale.study.sweep.driver import launches, run_sweep
from hvdscale.study.sweep.plan import SweepRequest, SweepSpec, plan_sweep
from tests.unit import fake_mpirun as fake

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "demo.yaml"

FAKE_MPIRUN = """#!{python}
import json, sys
argv = sys.argv[1:]
sets = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
value = lambda key: [s.split("=", 1)[1] for s in sets if s.startswith(key + "=")][-1]
strategy, np = value("strategy.name"), int(argv[argv.index("-np") + 1])
names = [s.split("=", 1)[1] for s in sets if s.startswith("name=")]
out = argv[argv.index("--out") + 1]
rec = json.load(open({templates!r}))[f"{{strategy}} {{np}}"]
rec["config"]["name"] = rec["name"] = names[-1] if names else rec["name"]
with open({log!r}, "a") as f:
    f.write(f"{{strategy}} {{np}} {{rec['name']}}\\n")
with open(out + "/results.jsonl", "a") as f:
    f.write(json.dumps(rec) + "\\n")
"""


def _plan(tmp_path: Path, repeats: int) -> SweepSpec:
    # A launch per point: what this stand-in launcher answers (tests/unit/test_shared_rounds.py
    # has the launch per round's)
    return plan_sweep(SweepRequest(CONFIG, "1,2", "horovod,independent", out=tmp_path / "out",
                                   repeats=repeats, launch_per_point=True),
                      env=dict(os.environ), check_out=False)


@pytest.fixture
def fake_mpirun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return fake.install(tmp_path, monkeypatch, _plan(tmp_path, 1), FAKE_MPIRUN)


def test_rounds_are_interleaved_rotated_tagged_and_resumed(tmp_path: Path,
                                                           fake_mpirun: Path) -> None:
    spec = _plan(tmp_path, 3)
    order = [(r, p.strategy, p.ranks) for r, p in launches(spec)]
    pts = [("horovod", 1), ("independent", 1), ("horovod", 2), ("independent", 2)]
    # Round 1 of every point, then round 2 (rotated by one), then round 3 (by two).
    assert order == [(r, *pts[(r + i) % 4]) for r in range(3) for i in range(4)]
    said: list[str] = []
    result = run_sweep(spec, say=said.append)
    assert [o.status for o in result.outcomes] == ["ok"] * 12
    assert [ln.split()[:3] for ln in fake_mpirun.read_text().splitlines()] == [
        [s, str(n), f"demo-round{r + 1}"] for r, s, n in order]
    progress = [s for s in said if ": ok " in s]
    assert progress[0].startswith("[1/12] round 1/3 torch horovod np=1: ok 100.0 words/s")
    assert progress[5].startswith("[6/12] round 2/3 torch horovod np=2: ok")

    # Round 2 of np=2 horovod is lost (as a failed launch would leave it): the rerun of the
    # same sweep launches that round only, tagged round 2, and skips the other eleven.
    recs = read_records(spec.out)
    lost = next(r for r in recs if r.ranks == 2 and r.strategy_name == "horovod"
                and round_of(r) == 1)
    kept = [r for r in recs if r is not lost]
    (spec.out / "results.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n"
                                                    for r in kept))
    said.clear()
    result = run_sweep(spec, say=said.append)
    assert [o.status for o in result.outcomes].count("skipped") == 11
    assert fake_mpirun.read_text().splitlines()[12:] == ["horovod 2 demo-round2"]
    # Asked for fewer rounds, everything is there already: nothing launches.
    assert all(o.status == "skipped" for o in run_sweep(_plan(tmp_path, 2), say=print).outcomes)
    assert len(fake_mpirun.read_text().splitlines()) == 13


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_repeats_must_be_a_positive_whole_number(tmp_path: Path, bad: object) -> None:
    with pytest.raises(HvdscaleError, match=r"--repeats must be a whole number of rounds >= 1"):
        _plan(tmp_path, bad)  # type: ignore[arg-type]
