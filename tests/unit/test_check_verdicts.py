"""Issues 50 and 62: check_benchmarks refuses a claim the decision procedure does not back in
README or BENCHMARKS.md, prose or table cell (seen
failing on README's former sentence "came within 10 % ... for Horovod and DDP", one round), a
late record (the evidence run's DDP np=8 point, left out of the table it was published in) and
a README figure that no longer matches its raw file."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORMER = ("`predict --fit` on 1 to 4 ranks came within 10 % at 6 and 8 ranks for Horovod and "
          "DDP. It missed")


def _module(name: str):
    # What check_benchmarks puts on the path for its checkers: they import each other,
    # check_evidence the evidence report's table functions (evidence/many_cores_report.py), and
    # check_verdicts the shaped-link table's pairing (bench/shaped_sweep_rows.py).
    for folder in ("evidence", "bench", "tools/checks"):
        sys.path.insert(0, str(ROOT / folder))
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / "checks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # a dataclass looks its module up there
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


PLANTED = "Horovod is the fastest strategy here, well ahead of the parameter server."
"""Issue 62's planted claim: no raw file, no verdict of the procedure behind it."""


def test_a_claim_needs_the_procedure_behind_it_or_says_it_is_undecided() -> None:
    v = _module("check_verdicts")
    assert v.unsupported_verdicts(FORMER + " for the rest.")  # within 10 %, nothing behind it
    assert v.unsupported_verdicts(PLANTED)
    assert v.unsupported_verdicts("Horovod is faster than DDP in every round (n=3).")  # sign rule
    assert v.unsupported_verdicts("| horovod | 24948 | the fastest |\n")  # table cells count
    assert v.unsupported_verdicts("Sparse gains nothing here (x0.989, 0.910-1.069).")
    assert v.unsupported_verdicts("DDP tuned at 1 MiB buckets.")
    assert not v.unsupported_verdicts("It read within 10 % once; one round is no verdict.")
    assert not v.unsupported_verdicts("Horovod against DDP is undecided (x1.05, 3 rounds).")
    assert not v.unsupported_verdicts("The step lasts as long as the slower rank's.")  # no pair
    assert not v.unsupported_verdicts("    x beats y\n\n```\nfastest\n```\n")  # code
    assert not v.unsupported_verdicts("<!-- generated: x -->\nA beats B\n<!-- end generated -->")


def test_a_claim_is_checked_against_its_raw_file_by_the_procedure() -> None:
    v = _module("check_verdicts")
    steady = {"rounds": [{"alone": {"wall_s": w}, "shared": {"wall_s": 1.0}}
                         for w in (1.66, 1.67, 1.71)]}
    scattered = {"rounds": [{"alone": {"wall_s": w}, "shared": {"wall_s": 1.0}}
                            for w in (1.1, 1.9, 1.3)]}
    claim = next(c for c in v.CLAIMS if c.raw == "demo_pair_issue53.json")
    figure, outcome = claim.figure(steady)
    assert outcome == "faster" and figure.startswith("decided faster, x1.68 (")
    text = f"One launch per round: {figure}."
    assert v.check_claims(text, lambda _: steady, [claim]) == ([figure], [])
    assert not v.unsupported_verdicts(text, [figure])
    # The same sentence on rounds that scatter: the procedure no longer decides it.
    fig2, out2 = claim.figure(scattered)
    _, bad = v.check_claims(f"One launch per round: {fig2}.", lambda _: scattered, [claim])
    assert out2 == "undecided" and bad and "the procedure says undecided" in bad[0]


def _check(tmp_path: Path, readme: str) -> subprocess.CompletedProcess:
    f = tmp_path / "README.md"
    f.write_text(readme)
    return subprocess.run([sys.executable, "tools/checks/check_benchmarks.py", "--readme", str(f)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_check_benchmarks_fails_on_the_former_readme_and_passes_on_this_one(
        tmp_path: Path) -> None:
    now = (ROOT / "README.md").read_text()
    assert _check(tmp_path, now).returncode == 0
    start = now.index("GPU. On that machine's 16 CPU cores")
    end = now.index("GPUs or nodes yet.")
    former = now[:start] + ("GPU. On that machine's 16 CPU cores, one round of the demo reached 8 "
                            "ranks. At 8 ranks Horovod trained 64,364 words/s, DDP 56,763 and "
                            "the parameter server 53,322, each from a single run. " + FORMER +
                            " for the parameter server. Nothing has run on several ") + now[end:]
    r = _check(tmp_path, former)
    assert r.returncode == 1
    assert ("README claim the decision procedure does not back (say it is undecided, or add a "
            "check_verdicts.CLAIMS entry with its raw file): '`predict --fit`") in r.stdout
    assert "DDP's np = 8 point finished after the round's deadline" in r.stdout  # the late one


def test_check_benchmarks_fails_on_a_planted_claim_in_benchmarks_md(tmp_path: Path) -> None:
    """Issue 62: the planted sentence fails check_benchmarks; the same sentence saying it is
    undecided passes the verdict rule."""
    md = (ROOT / "bench" / "BENCHMARKS.md").read_text()
    said = f"\n\n{PLANTED}\n"
    copy = tmp_path / "BENCHMARKS.md"
    copy.write_text(md + said)
    run = [sys.executable, "tools/checks/check_benchmarks.py", "--md", str(copy)]
    r = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert ("BENCHMARKS.md claim the decision procedure does not back (say it is undecided, or "
            f"add a check_verdicts.CLAIMS entry with its raw file): {PLANTED!r}") in r.stdout
    assert r.returncode == 1
    v = _module("check_verdicts")  # the same rule, in-process: a second run costs minutes
    assert v.check_verdicts(md + said.replace("server.", "server: undecided."),
                            "BENCHMARKS.md")[1] == []
