"""``hvdscale sweep --decide``: 3 rounds of every point, then rounds only for the points of the
comparisons still undecided, within the budget.

The launcher is a stand-in ``mpirun`` (tests/unit/fake_mpirun.py) whose records carry words/s
chosen per round: at np=1 independent / horovod scatters (1.10, 1.04, 1.07, 1.06, 1.08: the
procedure decides it at round 5, not before), at np=2 it is 2.0 within 1 % (decided at round 3).
What is tested is which rounds the sweep launches and why it stops.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hvdscale.records.store import read_records
from hvdscale.study.sweep.plan import SweepRequest, SweepSpec, plan_sweep
from hvdscale.study.sweep.until_decided import Open, choose, run_until_decided, standing
from tests.unit import fake_mpirun as fake

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "demo.yaml"
NP1 = [1.10, 1.04, 1.07, 1.06, 1.08, 1.05, 1.07, 1.06]
NP2 = [2.0, 2.02, 1.99, 2.01, 2.0, 2.0]

FAKE_MPIRUN = """#!{python}
import json, re, sys
argv = sys.argv[1:]
sets = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
value = lambda key: [s.split("=", 1)[1] for s in sets if s.startswith(key + "=")][-1]
strategy, np = value("strategy.name"), int(argv[argv.index("-np") + 1])
name = [s.split("=", 1)[1] for s in sets if s.startswith("name=")][-1]
r = int(re.search(r"round(\\d+)$", name).group(1)) - 1
out = argv[argv.index("--out") + 1]
rec = json.load(open({templates!r}))[f"{{strategy}} {{np}}"]
rec["config"]["name"] = rec["name"] = name
ratio = {np1!r}[r] if np == 1 else {np2!r}[r]
rec["words_per_s"] = 100.0 * (ratio if strategy == "independent" else 1.0)
with open({log!r}, "a") as f:
    f.write(f"{{strategy}} {{np}} {{r + 1}}\\n")
with open(out + "/results.jsonl", "a") as f:
    f.write(json.dumps(rec) + "\\n")
"""


def _plan(tmp_path: Path) -> SweepSpec:
    return plan_sweep(SweepRequest(CONFIG, "1,2", "horovod,independent", out=tmp_path / "out",
                                   launch_per_point=True),
                      env=dict(os.environ), check_out=False)


@pytest.fixture
def launches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = FAKE_MPIRUN.replace("{np1!r}", repr(NP1)).replace("{np2!r}", repr(NP2))
    return fake.install(tmp_path, monkeypatch, _plan(tmp_path), script)


def _rounds(log: Path) -> dict[tuple[str, int], list[int]]:
    out: dict[tuple[str, int], list[int]] = {}
    for line in log.read_text().splitlines():
        strategy, np, r = line.split()
        out.setdefault((strategy, int(np)), []).append(int(r))
    return out


def test_only_the_undecided_comparisons_points_get_more_rounds(tmp_path: Path,
                                                               launches: Path) -> None:
    spec = _plan(tmp_path)
    said: list[str] = []
    result = run_until_decided(spec, 3600.0, said.append)
    # np=2 is decided after the first 3 rounds; np=1 needs rounds 4 and 5, its points alone.
    assert _rounds(launches) == {("horovod", 1): [1, 2, 3, 4, 5],
                                 ("independent", 1): [1, 2, 3, 4, 5],
                                 ("horovod", 2): [1, 2, 3], ("independent", 2): [1, 2, 3]}
    assert [o.status for o in result.outcomes] == ["ok"] * 16
    steps = [s for s in said if s.startswith("hvdscale sweep --decide: 1 of 2")]
    assert steps[0].endswith("round 4 for 2 point(s) (nearest: np=1 torch / fused / horovod vs "
                             "torch / fused / independent, about 3 more round(s))")
    assert said[-1].startswith("hvdscale sweep --decide: 2 of 2 comparisons decided in 5 rounds")
    assert said[-1].endswith("stopped: every comparison decided")
    assert not standing(spec, read_records(spec.out)).open


def test_the_budget_holds_no_round_past_the_first_three(tmp_path: Path, launches: Path) -> None:
    said: list[str] = []
    run_until_decided(_plan(tmp_path), 0.001, said.append)
    assert {k: v[-1] for k, v in _rounds(launches).items()} == {
        ("horovod", 1): 3, ("independent", 1): 3, ("horovod", 2): 3, ("independent", 2): 3}
    assert said[-1].startswith("hvdscale sweep --decide: 1 of 2 comparisons decided in 3 rounds")
    assert "1 undecided (0 not in sight); stopped: the next round would overrun --budget" \
        in said[-1]


def test_a_rerun_goes_on_from_the_rounds_recorded(tmp_path: Path, launches: Path) -> None:
    spec = _plan(tmp_path)
    run_until_decided(spec, 0.001, lambda s: None)  # 3 rounds, np=1 left undecided
    said: list[str] = []
    run_until_decided(spec, 3600.0, said.append)
    assert _rounds(launches)[("horovod", 1)] == [1, 2, 3, 4, 5]
    assert _rounds(launches)[("horovod", 2)] == [1, 2, 3]
    assert said[-1].startswith("hvdscale sweep --decide: 2 of 2 comparisons decided in 5 rounds")


def test_choose_takes_the_nearest_first_within_the_time_left() -> None:
    opens = [Open("a", 1, frozenset({0, 1})), Open("b", 2, frozenset({1, 2, 3})),
             Open("c", None, frozenset({4, 5}))]
    assert choose(opens, 10.0, 25.0) == {0, 1}  # b would make 4 points, 40 s
    assert choose(opens, 10.0, 45.0) == {0, 1, 2, 3}  # c is not in sight: never chosen
    assert choose(opens, 10.0, 5.0) == frozenset()
    assert choose(opens, None, 0.0) == {0, 1}  # no estimate yet: the nearest alone


@pytest.mark.parametrize(("args", "said"), [
    (["--budget", "5m"], "hvdscale: error: --budget applies to --decide only"),
    (["--decide", "--budget", "-3"], "argument --budget: must be a positive time, e.g. 90s"),
    (["--decide", "--budget", "5 min"], "argument --budget: must be a positive time"),
])
def test_a_bad_budget_is_one_line_and_exit_2(args: list[str], said: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "hvdscale", "sweep", str(CONFIG), "--np", "1",
                        "--out", str(tmp_path / "out"), *args], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert said in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()  # refused before anything was made


def test_budget_units() -> None:
    from hvdscale.commands.common import duration

    assert [duration(t) for t in ("90", "90s", "2.5m", "1h")] == [90.0, 90.0, 150.0, 3600.0]


def test_a_dry_run_with_decide_shows_the_first_three_rounds(tmp_path: Path) -> None:
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "hvdscale", "sweep", str(CONFIG), "--np", "1",
                        "--strategies", "horovod,independent", "--decide", "--dry-run",
                        "--out", str(tmp_path / "out")], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("--decide: the 3 rounds below, then one round at a time")
    assert "= 2 points x 3 round(s), 3 launches" in r.stdout
