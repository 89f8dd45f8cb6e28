"""The mutation benchmark's own bookkeeping (issue 39): the lines it gives mutmut, the score it
computes, and the table it renders from a raw file alone."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import bench_mutation as bm  # noqa: E402


def test_only_the_named_functions_bodies_are_mutated(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text('def a():\n    """Doc."""\n    return 1\n\n\nclass C:\n    def b(self):\n'
                   '        x = 2\n        return x\n\n\ndef d():\n    return 3\n')
    assert bm._function_lines(src, ("a", "C.b")) == {3, 8, 9}
    nested = tmp_path / "n.py"
    nested.write_text("class C:\n    def b(self):\n        y = 1\n\n        def inner():\n"
                      "            return y\n        return inner\n")
    assert bm._function_lines(nested, ("C.b.inner",)) == {6}


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
    assert "| m | 20 | 18 | 2 | 0 | 1 | 90.0% | 94.7% | yes | 10 | 1.0/2.0 |" in text
    slow["equivalent"] = None
    assert "- m:6 `x` -> `y` (ok_suspicious): killed (its tests failed, more slowly than the " \
        "unmutated run)" in bm.render({"tool": bm.TOOL, "modules": [mod]})


def test_the_table_shows_each_survivor_and_its_reason() -> None:
    text = bm.render({"tool": bm.TOOL, "modules": [_mod()]})
    assert "| m | 20 | 17 | 3 | 0 | 1 | 85.0% | 89.5% | NO | 10 | 1.0/2.0 |" in text
    assert "- m:5 `a < b` -> `a <= b`: b is never equal to a" in text
    assert "- m:6 `x` -> `y`: OPEN" in text


def test_a_mutants_lines_are_made_again_without_mutmuts_cache() -> None:
    from mutmut import ALL, Context, mutate

    source = "def f(a, b):\n    x = 1\n    return a < b\n"
    ctx = Context(source=source, mutation_id=ALL)
    mutate(ctx)
    got = {bm._diff(source, {"text": m.line, "index": m.index, "line": m.line_number + 1})
           for m in ctx.performed_mutation_ids}
    assert ("return a < b", "return a <= b") in got
    assert ("x = 1", "x = 2") in got
    assert all(before in ("x = 1", "return a < b") for before, _ in got)
