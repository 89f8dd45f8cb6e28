"""tools/flakes.py, the flaky-test hunter: it must see a test that fails one run in two, name
it with its rate and runs, and keep a shuffled order reproducible from its seed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

from tools.flake_order import shuffled
from tools.flakes import ROOT, failed_tests, rates

# Fails in every second run (a counter file beside it), passes otherwise; a steady test too.
FLAKY = textwrap.dedent("""
    from pathlib import Path

    def test_steady():
        assert True

    def test_every_other_run():
        counter = Path(__file__).with_name("count")
        n = int(counter.read_text()) if counter.exists() else 0
        counter.write_text(str(n + 1))
        assert n % 2 == 0, f"run {n}"
""")


def test_a_test_failing_every_other_run_is_named_with_its_rate(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(FLAKY)
    out = tmp_path / "result.json"
    r = subprocess.run([sys.executable, "tools/flakes.py", str(tmp_path / "test_sample.py"),
                        "--runs", "4", "--out", str(out)], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr  # a test failed at least once
    result = json.loads(out.read_text())
    assert [run["exit"] for run in result["runs"]] == [0, 1, 0, 1]
    (row,) = result["flaky"]
    assert row["test"].endswith("test_sample.py::test_every_other_run")
    assert row["failed_runs"] == [1, 3] and row["rate"] == 0.5
    assert "50.0%" in r.stdout and "test_every_other_run" in r.stdout
    assert all(run["counts"]["tests"] == 2 for run in result["runs"])


def test_every_run_green_exits_0(tmp_path: Path) -> None:
    (tmp_path / "test_fine.py").write_text("def test_fine():\n    assert True\n")
    r = subprocess.run([sys.executable, "tools/flakes.py", str(tmp_path / "test_fine.py"),
                        "--runs", "2", "--shuffle", "--seed", "7"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 green" in r.stdout and "no test failed in any run" in r.stdout


def test_a_bad_phase_is_one_clear_error() -> None:
    r = subprocess.run([sys.executable, "tools/flakes.py", "tests/no_such_dir"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "no such phase or path: tests/no_such_dir" in r.stderr
    assert "Traceback" not in r.stderr


def test_junit_failures_and_errors_both_count(tmp_path: Path) -> None:
    junit = tmp_path / "j.xml"
    junit.write_text(
        '<testsuites><testsuite><testcase classname="tests.unit.test_a" name="t1"/>'
        '<testcase classname="tests.unit.test_a" name="t2"><failure message="x"/></testcase>'
        '<testcase classname="tests.unit.test_b" name="t3"><error message="y"/></testcase>'
        '<testcase classname="tests.unit.test_b" name="t4"><skipped/></testcase>'
        "</testsuite></testsuites>")
    failed, counts = failed_tests(junit)
    assert failed == ["tests/unit/test_a.py::t2", "tests/unit/test_b.py::t3"]
    assert counts == {"tests": 4, "failures": 1, "errors": 1, "skipped": 1}
    runs = [{"run": 0, "failed": failed}, {"run": 1, "failed": failed[:1]}, {"run": 2,
                                                                            "failed": []}]
    assert rates(runs) == [
        {"test": "tests/unit/test_a.py::t2", "failed_runs": [0, 1], "rate": 0.667},
        {"test": "tests/unit/test_b.py::t3", "failed_runs": [0], "rate": 0.333}]


def test_a_shuffle_keeps_modules_together_and_repeats_from_its_seed() -> None:
    items = [SimpleNamespace(nodeid=f"tests/m{m}.py::t{t}") for m in range(5) for t in range(6)]
    one, again, other = shuffled(items, 3), shuffled(list(items), 3), shuffled(items, 4)
    assert [i.nodeid for i in one] == [i.nodeid for i in again]
    assert [i.nodeid for i in one] != [i.nodeid for i in other]
    assert sorted(i.nodeid for i in one) == sorted(i.nodeid for i in items)
    modules = [i.nodeid.split("::")[0] for i in one]
    runs = [m for k, m in enumerate(modules) if k == 0 or modules[k - 1] != m]
    assert len(runs) == 5  # each module's tests in one stretch
    assert [i.nodeid for i in one] != [i.nodeid for i in items]
    within = [[i.nodeid for i in one if i.nodeid.startswith(f"tests/m{m}.py")] for m in range(5)]
    assert any(w != sorted(w) for w in within)  # the tests of a module are shuffled too


def test_suite_timing_sums_modules_and_shows_the_change(tmp_path: Path) -> None:
    from tools.suite_timing import main

    def junit(name: str, times: dict[str, float]) -> Path:
        cases = "".join(f'<testcase classname="tests.integration.{k.split("::")[0]}" '
                        f'name="{k.split("::")[1]}" time="{v}"/>' for k, v in times.items())
        path = tmp_path / name
        path.write_text(f"<testsuites><testsuite>{cases}</testsuite></testsuites>")
        return path

    before = junit("b.xml", {"test_a::x": 60.0, "test_a::y": 7.5, "test_b::z": 30.0})
    after = junit("a.xml", {"test_a::x": 20.0, "test_a::y": 7.5, "test_b::z": 31.0})
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main([str(before), str(after)]) == 0
    text = buf.getvalue()
    assert "total: 98 s in 3 tests -> 58 s in 3 tests" in text
    assert "test_a | 67.5 (2) | 27.5 (2) | -40.0" in text
    assert "test_a::x | 60.0 | 20.0" in text.splitlines()[-3]  # the slowest test first
