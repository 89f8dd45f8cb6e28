"""Issue 50: README's GPU figures and its timing table are recomputed from bench/results by
check_benchmarks (through check_verdicts.check_readme), as its 8-rank paragraph is: a figure
changed in README, or a raw file that no longer gives it, is a mismatch."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "checks"))

import check_benchmarks  # noqa: E402
import readme_figures as rf  # noqa: E402
from check_verdicts import check_readme  # noqa: E402


def _raw(name: str):  # type: ignore[no-untyped-def]
    return check_benchmarks._raw(ROOT / "bench" / "results" / name)


def test_minutes_and_seconds_as_readme_prints_them() -> None:
    assert rf.min_s(308.85) == "5 min 09 s"
    assert rf.min_s(2071) == "34 min 31 s"
    assert rf.min_s(59.6) == "1 min 00 s"


def test_the_timings_come_from_their_logs() -> None:
    first = ("/tmp/install.log created 08:23:49.34 UTC, last written (rc=0) 08:28:58.19 UTC\n"
             "Horovod build log created 08:24:37.54, wheel cached 08:28:29.59\n"
             "1-minute load at 08:27:27 (during the build): 2.02\n")
    warm = "install end rc=0 elapsed_s=96.76\ndemo end rc=0 elapsed_s=4.2\n"
    got = rf.install_and_demo(first, warm)
    assert got[0] == ("| `launch/install.sh`, first time | 5 min 09 s, of which 3 min 52 s the "
                      "Horovod build |")
    assert got[1] == "| `launch/install.sh`, again (wheel cached) | 97 s |"
    assert got[2] == ("| `make demo`, again (points recorded: prints the report) | 4 s after "
                      "the install |")


def test_the_demo_sweep_is_the_procedures_verdict_on_the_paired_runs() -> None:
    def way(wall: float, load: float) -> dict:
        return {"wall_s": wall, "load_before": [load, 0, 0], "load_after": [load + 0.5, 0, 0]}

    raw = {"rounds": [{"shared": way(100.0, 1.0), "alone": way(400.0, 1.2)},
                      {"shared": way(120.0, 1.1), "alone": way(300.0, 0.9)},
                      {"shared": way(110.0, 1.4), "alone": way(350.0, 1.3)}]}
    assert rf.demo_pair(raw) == [
        "| the demo's sweep, 2 rounds of 12 points | 1 min 50 s in 8 launches; 5 min 50 s with a "
        "launch per point (one launch per round decided faster, x3.17 (1.37-7.35), 3 paired runs) "
        "| 1-minute load 0.9-1.9"]


def test_readme_as_it_is_passes_and_a_changed_figure_fails() -> None:
    readme = (ROOT / "README.md").read_text()
    n, bad = check_readme(readme, _raw)
    assert bad == [] and n > 0
    for old, new, section in [("36 min 02 s", "30 min 02 s", "README make test"),
                              ("780,169 in TF32", "790,169 in TF32", "README GPU"),
                              ("3 min 52 s the Horovod", "3 min 50 s the Horovod",
                               "README timings")]:
        assert old in readme
        _, bad = check_readme(readme.replace(old, new), _raw)
        assert [b.split(":")[0] for b in bad] == [section], bad
