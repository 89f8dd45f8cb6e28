"""README's figures outside its 8-rank paragraph, recomputed from bench/results (issue 50):
the GPU paragraph's words/s and the table of how long each command takes. Each function takes
the raw files' contents (as check_benchmarks reads them) and returns the strings README must
show; check_verdicts.README_CHECKS lists them with their files."""

from __future__ import annotations

import re
import statistics
from datetime import datetime
from typing import Any

from check_evidence import _ok

from hvdscale.records.fields import Record
from hvdscale.study.verdict import decide

SEEDS = "h100_2026-11-27b/gpu/seeds/results.jsonl"
DEMO = "demo_timing_issue44/"
DEMO_PAIR = "demo_pair_issue53.json"
CI_RUNS = "suite_timing_issue49/ci_runs.json"
MUTATION_CI = "mutation_ci.json"


def min_s(seconds: float) -> str:
    """``5 min 09 s`` (whole seconds, rounded)."""
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s:02d} s"


def gpu_seeds(records: list[Record]) -> list[str]:
    """The seed notes' NMT on one H100, fused at fp32, TF32 and bf16, and the loop's range."""
    by = {(r.model_config.rnn_impl, (r.precision or {})["compute"]): r.words_per_s
          for r in _ok(records)}
    loop = sorted(v for (impl, _), v in by.items() if impl == "loop")
    return [f"trained {by['fused', 'fp32']:,.0f} words/s with the fused kernel in fp32, "
            f"{by['fused', 'tf32']:,.0f} in TF32 and {by['fused', 'bf16']:,.0f} in bf16",
            f"The step-by-step loop trained {loop[0]:,.0f} to {loop[-1]:,.0f} words/s"]


def _span(a: str, b: str) -> float:
    t0, t1 = (datetime.strptime(x, "%H:%M:%S.%f") for x in (a, b))
    return (t1 - t0).total_seconds()


def install_and_demo(first: str, warm: str) -> list[str]:
    """The install's first time and its Horovod build (from their logs' times), the install
    again and the report after it."""
    stamps = re.findall(r"\d\d:\d\d:\d\d\.\d+", first)  # log made/ended, build made/ended
    elapsed = [float(x) for x in re.findall(r"elapsed_s=([\d.]+)", warm)]
    return [f"| `launch/install.sh`, first time | {min_s(_span(stamps[0], stamps[1]))}, of "
            f"which {min_s(_span(stamps[2], stamps[3]))} the Horovod build |",
            f"| `launch/install.sh`, again (wheel cached) | {elapsed[0]:.0f} s |",
            f"| `make demo`, again (points recorded: prints the report) | {elapsed[1]:.0f} s "
            f"after the install |"]


def demo_pair(raw: dict[str, Any]) -> list[str]:
    """The demo's 2-round sweep, one launch per round against a launch per point, paired
    (bench/bench_shared_launch.py), with the 1-minute loads its sweeps recorded."""
    rounds = raw["rounds"]
    shared = statistics.median(r["shared"]["wall_s"] for r in rounds)
    alone = statistics.median(r["alone"]["wall_s"] for r in rounds)
    ratios = [r["alone"]["wall_s"] / r["shared"]["wall_s"] for r in rounds]
    loads = [x for r in rounds for w in ("shared", "alone")
             for x in (r[w]["load_before"][0], r[w]["load_after"][0])]
    v = decide(ratios)  # the verdict is the procedure's (issue 62), its interval included
    return [f"| the demo's sweep, 2 rounds of 12 points | {min_s(shared)} in 8 launches; "
            f"{min_s(alone)} with a launch per point (one launch per round decided faster, "
            f"x{v.ratio:.2f} ({v.lo:.2f}-{v.hi:.2f}), {v.n} paired runs) | "
            f"1-minute load {min(loads):.1f}-{max(loads):.1f}"]


def make_test(ci: dict[str, Any]) -> list[str]:
    """`make test` on CI's fresh machine: the newest run CI recorded as passed."""
    run = [r for r in ci["runs"] if r["result"] == "passed"][-1]
    return [f"| `make test`, install included | {min_s(run['seconds'])} | {run['date']}, CI's "
            f"fresh machine, a fresh clone of {run['commit']}"]


def mutation_slice(raw: dict[str, Any]) -> list[str]:
    """The CI slice's mutmut seconds (its targets' runs, one after the other) and their load."""
    mods = raw["modules"]
    loads = [x for m in mods for x in (m["load_before"][0], m["load_after"][0])]
    return [f"the wire checks and a token reduction, {sum(m['seconds'] for m in mods):.0f} s at "
            f"a 1-minute load of {min(loads):.1f}-{max(loads):.1f}"]
