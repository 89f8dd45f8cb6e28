"""The mutation benchmark's own bookkeeping (issue 39): the lines it gives mutmut, the score it
computes, and the table it renders from a raw file alone."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

MUTATION = Path(__file__).resolve().parents[2] / "tools" / "mutation"
sys.path.insert(0, str(MUTATION))

import bench_mutation as bm  # noqa: E402
import mutation_mutmut as mm  # noqa: E402
import mutation_recheck as mr  # noqa: E402


def test_only_the_named_functions_bodies_are_mutated(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text('def a():\n    """Doc."""\n    return 1\n\n\nclass C:\n    def b(self):\n'
                   '        x = 2\n        return x\n\n\ndef d():\n    return 3\n')
    assert mm._function_lines(src, ("a", "C.b")) == {3, 8, 9}
    nested = tmp_path / "n.py"
    nested.write_text("class C:\n    def b(self):\n        y = 1\n\n        def inner():\n"
                      "            return y\n        return inner\n")
    assert mm._function_lines(nested, ("C.b.inner",)) == {6}


def _mod(**over: object) -> dict:
    mod = {"name": "m", "full": False, "mutants": 20, "killed": 17, "survived": 3,
           "timed_out": 0, "untested": 0, "seconds": 10.0, "load_before": [1.0, 1, 1],
           "load_after": [2.0, 1, 1],
           "survivors": [{"line": 5, "status": "bad_survived", "before": "a < b",
                          "after": "a <= b", "equivalent": "b is never equal to a"},
                         {"line": 6, "status": "bad_survived", "before": "x", "after": "y",
                          "equivalent": None},
                         {"line": 7, "status": "bad_survived", "before": "p", "after": "q",
                          "equivalent": None}]}
    return {**mod, **over}


def test_the_score_leaves_equivalent_mutants_out() -> None:
    assert bm.score(_mod()) == (1, 19, 17 / 19)
    assert not bm.meets_goal(_mod())  # 89.5%
    assert bm.meets_goal(_mod(killed=18, survivors=_mod()["survivors"][:2]))  # 18/19
    assert not bm.meets_goal(_mod(full=True, killed=18))


def test_a_suspicious_mutant_is_killed_and_an_explanation_does_not_excuse_it() -> None:
    # mutmut's "suspicious": its tests failed, only more slowly than the unmutated run.
    slow = {"line": 6, "status": "ok_suspicious", "before": "x", "after": "y",
            "equivalent": "not needed"}
    mod = _mod(killed=17, survived=2, suspicious=1,
               survivors=[*_mod()["survivors"][:1], slow, _mod()["survivors"][2]])
    assert bm.score(mod) == (1, 19, 18 / 19)
    text = bm.render({"tool": bm.TOOL, "modules": [_mod(suspicious=0), mod]})
    assert "| m | 20 | 18 | 2 | 0 | 0 | 0 | 1 | 90.0% | 94.7% | yes | 10 | 1.0/2.0 |" in text
    slow["equivalent"] = None
    assert "- m:6 `x` -> `y` (ok_suspicious): killed (its tests failed, more slowly than the " \
        "unmutated run)" in bm.render({"tool": bm.TOOL, "modules": [mod]})


def test_the_table_shows_each_survivor_and_its_reason() -> None:
    text = bm.render({"tool": bm.TOOL, "modules": [_mod()]})
    assert "| m | 20 | 17 | 3 | 0 | 0 | 0 | 1 | 85.0% | 89.5% | NO | 10 | 1.0/2.0 |" in text
    assert "- m:5 `a < b` -> `a <= b`: b is never equal to a" in text
    assert "- m:6 `x` -> `y`: OPEN" in text


def test_a_mutants_lines_are_made_again_without_mutmuts_cache() -> None:
    from mutmut import ALL, Context, mutate

    source = "def f(a, b):\n    x = 1\n    return a < b\n"
    ctx = Context(source=source, mutation_id=ALL)
    mutate(ctx)
    got = {mm._diff(source, {"text": m.line, "index": m.index, "line": m.line_number + 1})
           for m in ctx.performed_mutation_ids}
    assert ("return a < b", "return a <= b") in got
    assert ("x = 1", "x = 2") in got
    assert all(before in ("x = 1", "return a < b") for before, _ in got)


def _rerun(outcome: str, load: float = 1.0) -> dict:
    return {"outcome": outcome, "seconds": 12.0, "limit_s": 120.0, "load_before": [load, 1, 1],
            "commit": "abc1234"}


def test_a_timeout_counts_only_when_a_quiet_rerun_at_4x_times_out_again() -> None:
    slow = {"line": 8, "status": "bad_timeout", "before": "i += 1", "after": "i = 1",
            "equivalent": None}
    mod = _mod(killed=18, survived=1, timed_out=1,
               survivors=[_mod()["survivors"][0], slow])
    assert bm.score(mod) == (1, 19, 18 / 19)  # not rerun: no detection
    assert "timed out; not rerun at 4x the limits yet: not counted" in bm.render(
        {"tool": bm.TOOL, "modules": [mod]})
    slow["recheck"] = _rerun("timeout", load=4.0)  # a busy machine confirms nothing
    assert bm.score(mod)[2] == 18 / 19
    slow["recheck"] = _rerun("timeout")
    assert bm.score(mod) == (1, 19, 1.0)
    text = bm.render({"tool": bm.TOOL, "modules": [mod]})
    assert "| m | 20 | 18 | 1 | 1 | 0 | 1 | 1 | 90.0% | 100.0% | yes |" in text
    assert "timed out again when rerun at abc1234 with a 120-s limit (12 s, load 1.0): " \
        "detected" in text
    slow["recheck"] = _rerun("survived")
    assert bm.score(mod)[2] == 18 / 19
    assert "- m:8 `i += 1` -> `i = 1` (bad_timeout): OPEN: its tests passed" in bm.render(
        {"tool": bm.TOOL, "modules": [mod]})


def test_an_open_survivor_counts_as_killed_only_when_its_rerun_failed() -> None:
    mod = _mod()
    mod["survivors"][1]["recheck"] = _rerun("killed")
    assert bm.score(mod) == (1, 19, 18 / 19)
    mod["survivors"][2]["recheck"] = _rerun("survived")
    assert bm.score(mod) == (1, 19, 18 / 19)
    text = bm.render({"tool": bm.TOOL, "modules": [mod]})
    assert "| m | 20 | 17 | 3 | 0 | 1 | 0 | 1 | 85.0% | 94.7% | yes |" in text
    assert "- m:6 `x` -> `y`: killed when rerun at abc1234" in text


def test_more_than_one_explained_mutant_in_ten_misses_the_goal() -> None:
    why = [{"line": i, "status": "bad_survived", "before": f"a{i}", "after": f"b{i}",
            "equivalent": "the same"} for i in range(3)]
    assert bm.meets_goal(_mod(killed=17, survivors=why[:2]))  # 2 in 20
    assert not bm.meets_goal(_mod(killed=17, survivors=why))  # 3 in 20, though 17/17
    assert bm.meets_goal(_mod(mutants=4, killed=3, survived=1, survivors=why[:1]))


def test_a_mutant_is_placed_where_its_line_now_is() -> None:
    src = "def f(a):\n    x = a + 1\n    return x\n"
    assert mr.mutant_source(src, 2, "x = a + 1", "x = a - 1") == \
        "def f(a):\n    x = a - 1\n    return x\n"
    moved = "import os\n\n" + src
    assert mr.mutant_source(moved, 2, "x = a + 1", "x = a - 1").endswith(
        "    x = a - 1\n    return x\n")
    with pytest.raises(ValueError, match="on 2 lines"):
        mr.mutant_source(src + "    x = a + 1\n", 9, "x = a + 1", "x = 0")


def test_a_rerun_tells_a_kill_a_hang_and_a_pass_apart(tmp_path: Path) -> None:
    """Real reruns of a small module's mutants under the benchmark's wrapper: one its test
    catches, one that loops for ever (past 4 x 10 x the baseline), one it does not catch."""
    (tmp_path / "mod.py").write_text(
        "def f(n):\n    i = 0\n    while i < n:\n        i += 1\n    return i * 2\n")
    (tmp_path / "test_mod.py").write_text(
        "from mod import f\n\n\ndef test_f():\n    assert f(3) >= 0\n")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_mod.py"]
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    assert mr.measure_baseline(cmd, tmp_path, env, tmp_path / "log") > 0
    base = 0.1  # a 4-s limit: the test itself takes about 1 s here, a hang costs 4
    survivors = [{"line": 5, "status": "bad_survived", "before": "return i * 2",
                  "after": "return -1", "equivalent": None},
                 {"line": 4, "status": "bad_timeout", "before": "i += 1", "after": "i = 1",
                  "equivalent": None},
                 {"line": 5, "status": "bad_survived", "before": "return i * 2",
                  "after": "return i * 3", "equivalent": None},
                 {"line": 2, "status": "bad_survived", "before": "i = 0", "after": "i = 1",
                  "equivalent": "explained: not rerun"}]
    mod = {"path": "mod.py", "survivors": survivors}
    mr.recheck(mod, tmp_path, cmd, env, (base, "measured"))
    got = [(s.get("recheck") or {}).get("outcome") for s in survivors]
    assert got == ["killed", "timeout", "survived", None]
    assert survivors[1]["recheck"]["limit_s"] == 4.0
    assert (tmp_path / "mod.py").read_text().count("i += 1") == 1  # the module put back
