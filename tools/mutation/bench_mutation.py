"""Mutation benchmark (issue 39): can the tests that claim a module fail when it is broken?

A real mutation tool (mutmut, pinned in ``TOOL``) changes the module under test one small edit
at a time (an operator, a constant, a comparison, a call dropped) and runs the tests that claim
it after each edit; a mutant those tests still pass is a survivor. Each target is a module (or
only its named functions, given to mutmut as a patch file of their lines) with its own tests:
fast unit tests where they suffice, ``mpirun -np 2`` where only ranks can tell. Everything runs
in a private scratch copy of the checkout, so the worktree is never mutated.

A survivor is killed by a new test or listed in ``EQUIVALENT`` (old and new line) with one line
saying why no test can tell it apart (at most one mutant in ten of a module). Score: detected
over mutants not so explained, where detected is killed, or a timeout that a rerun once at 4x
the limits on a quiet machine confirms (mutation_recheck.py; a run reruns its own timeouts at
once); goal 90% a module, 100% for the wire checks and the token-weighted reductions
(``Target.full``). The targets: mutation_targets.py; one target's run: mutation_mutmut.py (all
in tools/mutation/). ``--only peers_wire`` runs one target into the raw file, ``--ci`` the CI
slice (exit 1 on a survivor), ``--recheck NAMES`` reruns an older result's timeouts and open
survivors, ``--render FILE`` prints a raw file's table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# The benches' own helpers (scratch, emit) live in bench/; this harness uses them as they do.
sys.path.insert(0, str(ROOT / "bench"))
import mutation_table  # noqa: E402
from mutation_mutmut import TOOL, recheck_target, run_target  # noqa: E402
from mutation_table import meets_goal, restamp, score  # noqa: E402, F401  (score: the tests')
from mutation_targets import TARGETS, Target  # noqa: E402
from scratch import scratch_dir  # noqa: E402

RAW = ROOT / "bench" / "results" / "mutation.json"


def render(raw: dict[str, Any]) -> str:
    """The per-module table and the survivors, from the raw result alone."""
    return mutation_table.render(raw, [t.name for t in TARGETS])


def _merge(path: Path, mods: list[dict[str, Any]]) -> dict[str, Any]:
    """The raw file with ``mods`` in place of their earlier entries, in TARGETS' order."""
    raw = json.loads(path.read_text()) if path.is_file() else {"tool": TOOL, "modules": []}
    by_name = {m["name"]: m for m in raw["modules"]} | {m["name"]: m for m in mods}
    order = [t.name for t in TARGETS]
    raw["modules"] = sorted(by_name.values(),
                            key=lambda m: order.index(m["name"]) if m["name"] in order else 99)
    raw["tool"] = TOOL
    return raw


def _parser() -> argparse.ArgumentParser:
    """The command line (see the module's docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="comma-separated target names")
    ap.add_argument("--ci", action="store_true",
                    help="the CI slice; exit 1 when a mutant survives that is not equivalent")
    ap.add_argument("--json", default=str(RAW), help="raw file to merge into ('' : none)")
    ap.add_argument("--work", default=None, help="scratch directory (default: a fresh one)")
    ap.add_argument("--render", default="", help="print the table of a raw file and stop")
    ap.add_argument("--restamp", action="store_true",
                    help="re-read the survivors' reasons from EQUIVALENT into --json and stop")
    ap.add_argument("--recheck", default="", help="comma-separated targets of --json whose "
                    "timeouts and open survivors run once more, at 4x the limits")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Run the chosen targets (all by default), merge them into the raw file, print the table."""
    args = _parser().parse_args(argv)
    if args.recheck:
        return _recheck([n for n in args.recheck.split(",") if n], Path(args.json), args.work)
    if args.render:
        print(render(json.loads(Path(args.render).read_text())), end="")
        return 0
    if args.restamp:
        raw = restamp(json.loads(Path(args.json).read_text()))
        Path(args.json).write_text(json.dumps(raw, indent=1) + "\n")
        return 0
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - {t.name for t in TARGETS})
    if unknown:
        print(f"bench_mutation: no target {', '.join(unknown)}", file=sys.stderr)
        return 2
    if shutil.which("mutmut") is None:
        print(f"bench_mutation: mutmut is not installed (pip install '{TOOL}')", file=sys.stderr)
        return 2
    chosen = [replace(t, tests=t.ci_tests) if args.ci and t.ci_tests else t for t in TARGETS
              if (t.name in names if names else not args.ci or t.ci)]
    mods = _mutate(chosen, args.work)
    raw = _merge(Path(args.json), mods) if args.json else {"tool": TOOL, "modules": mods}
    raw["ci"] = args.ci  # the CI slice's file: no "not run yet" for the targets it leaves out
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=1) + "\n")
    print(mutation_table.render({"tool": TOOL, "modules": mods}, []), end="")  # this run's
    # CI: every mutant tested (a tool crash fails too) and every survivor explained.
    ok = all(meets_goal(m) and not m["untested"] and not m.get("tool_error") for m in mods)
    return 0 if ok or not args.ci else 1


def _mutate(chosen: list[Target], work_dir: str | None) -> list[dict[str, Any]]:
    """Each chosen target's raw entry, mutated in ``work_dir`` (a fresh private directory,
    removed after, when None)."""
    work = scratch_dir(work_dir, "hvdscale-bench-mutation-")
    mods = []
    try:
        for t in chosen:
            print(f"mutating {t.path} ({', '.join(t.functions) or 'whole module'})",
                  file=sys.stderr, flush=True)
            # 0711: the second user reaches the copy by its name; no one else lists or writes
            work.chmod(0o711 if t.others_read else 0o700)
            mods.append(run_target(t, work))
    finally:
        work.chmod(0o700)
    if work_dir is None:
        shutil.rmtree(work, ignore_errors=True)
    return mods


def _recheck(names: list[str], path: Path, work_dir: str | None) -> int:
    """``--recheck``: rerun the named results' open survivors, merge them into ``path``."""
    raw = restamp(json.loads(path.read_text()))  # explanations as they are today
    have, targets = {m["name"]: m for m in raw["modules"]}, {t.name: t for t in TARGETS}
    missing = [n for n in names if n not in have or n not in targets]
    if missing or not names:
        print(f"bench_mutation: no result to recheck for {', '.join(missing) or '(none named)'}"
              f" in {path}", file=sys.stderr)
        return 2
    work = scratch_dir(work_dir, "hvdscale-bench-mutation-")
    mods = [recheck_target(targets[n], have[n], work) for n in names]
    path.write_text(json.dumps(_merge(path, mods) | {"ci": raw.get("ci", False)}, indent=1)
                    + "\n")
    print(mutation_table.render({"tool": TOOL, "modules": mods}, []), end="")
    if work_dir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
