"""BENCHMARKS.md's issue 43 section (the evidence run's first loan, an H100 machine, 2026-11-27),
recomputed from the raw results in ``bench/results/h100_2026-11-27b/`` (PROVENANCE.md there):
``check_benchmarks.py`` calls each function below with its raw files' contents and looks for
every returned line in the text.

The CPU figures come from ``evidence/evidence_run.sh --part cpu`` (16 cores, a core per rank, GPU
hidden, nothing else running): one complete round of the demo sweep but one point, and a second
round cut after np = 2; the GPU figures from ``--part gpu`` (gpu_check, the seeds' model at three
precisions). Scaling rows and the fit are computed by ``evidence/many_cores_report.py``'s own
functions, the limit table by ``hvdscale.study.stepcost.gpu_limit``.
"""

from __future__ import annotations

import statistics

from many_cores_report import scaling_rows, speedup_cell, validation_rows  # bench/ on sys.path

from hvdscale.records.fields import Record
from hvdscale.records.gemm import GemmRecord
from hvdscale.records.run import RunRecord
from hvdscale.study.stepcost.gpu_limit import limit_rows
from hvdscale.study.stepcost.gpu_limit import markdown as limit_markdown

EV = "h100_2026-11-27b/"
CPU, GPU = EV + "cpu/", EV + "gpu/"
ROUNDS = (CPU + "round1/demo/results.jsonl", CPU + "round2/demo/results.jsonl")
H100_GEMM = "h100_2026-11-27/gpu/gemm/results.jsonl"
"""The first loan's GEMM curves (the same GPU model): this loan's gemm stage was cut for time."""


def _ok(recs: list[Record]) -> list[RunRecord]:
    return [r for r in recs if isinstance(r, RunRecord)]


SCALING_HEAD = ("| strategy | n | words/s (median) | min-max | rounds | speed-up, paired in a "
                "round | efficiency | idle ms a step |\n|:--|--:|--:|:--|--:|:--|--:|--:|")


def evidence_scaling(round1: list[Record], round2: list[Record]) -> list[str]:
    """The demo on 16 cores, as one table (a stale or extra row fails the check): per strategy
    and n, words/s (median over the rounds that reached it, min-max), the speed-up paired within
    each round over that round's own n = 1 (median [range]) and its efficiency, idle ms a step.
    The records are those the sweeps accounted for (``check_benchmarks._raw``)."""
    rows = [SCALING_HEAD]
    for r in scaling_rows([_ok(round1), _ok(round2)]):
        idle = r.get("breakdown_ms", {}).get("idle", 0.0)
        eff = f"{r['efficiency']:.2f}" if "efficiency" in r else "—"
        rows.append(f"| {r['strategy']} | {r['n']} | {r['words_per_s']:,.0f} | "
                    f"{r['min']:,.0f}-{r['max']:,.0f} | {r['rounds']} | {speedup_cell(r)} | "
                    f"{eff} | {idle:.1f} |")
    return ["\n".join(rows)]


FIT_HEAD = ("| round | strategy | n | measured words/s | predicted | error | within 10 % "
            "| term most wrong |\n|--:|:--|--:|--:|--:|--:|:--|:--|")


def evidence_fit(round1: list[Record], round2: list[Record]) -> list[str]:
    """``predict --fit`` on n <= 4 of each round, its error at n = 6 and 8 per strategy, as one
    table, and which rounds could be validated: one round's errors are figures, not a verdict
    on the predictor (that needs 3 rounds, each validated against its own points)."""
    rows = validation_rows("demo", [_ok(round1), _ok(round2)], 4)
    table = [FIT_HEAD] + [
        f"| {r['round'] + 1} | {r['strategy']} | {r['n']} | {r['measured_words_per_s']:,.0f} "
        f"| {r['predicted_words_per_s']:,.0f} | {100 * (r['ratio'] - 1):+.1f} % | "
        f"{'yes' if abs(r['ratio'] - 1) <= 0.10 else 'no'} | {r['most_wrong_term']} |"
        for r in rows if "error" not in r and r["n"] in (6, 8)]
    validated = sorted({r["round"] + 1 for r in rows if "error" not in r and r["n"] > 4})
    failed = sorted({r["round"] + 1 for r in rows if "error" in r})
    return ["\n".join(table),
            f"rounds validated at n > 4: {', '.join(map(str, validated)) or 'none'} of the 3 a "
            f"verdict needs; fits that failed: {', '.join(map(str, failed)) or 'none'}"]


def evidence_fit_other_base(round1: list[Record], round2: list[Record]) -> list[str]:
    """The same fit with round 2's np = 1 points in place of round 1's: how far one base run
    moves the errors at n = 6 and 8."""
    mixed = ([r for r in _ok(round1) if r.workers > 1]
             + [r for r in _ok(round2) if r.workers == 1])
    rows = [r for r in validation_rows("demo", [mixed], 4) if "error" not in r and r["n"] > 4]
    return ["with round 2's np = 1 as the base: " + ", ".join(
        f"{r['strategy']} {r['n']} {100 * (r['ratio'] - 1):+.1f} %" for r in rows)]


def evidence_startup(round1: list[Record], round2: list[Record],
                     seeds: list[Record]) -> list[str]:
    """Start-up phases (the slowest rank's seconds, median over points): the CPU sweep's points
    and the seeds' GPU runs."""
    out = []
    for name, recs in (("CPU sweep", _ok(round1) + _ok(round2)), ("GPU seeds", _ok(seeds))):
        marks = [r.startup for r in recs if r.startup]
        keys = ("imports", "mpi", "model", "first_step")
        cells = " | ".join(f"{statistics.median(m.max_s[k] for m in marks):.1f}" for k in keys)
        total = [m.total_max_s for m in marks]
        out.append(f"| {name} | {len(marks)} | {cells} | {statistics.median(total):.1f} "
                   f"({min(total):.1f}-{max(total):.1f}) |")
    return out


def evidence_seeds(seeds: list[Record], gemms: list[Record]) -> list[str]:
    """The seeds' model at fp32, TF32 and bf16, fused and loop: the limit table's rows, and
    each precision's speed-up over fp32."""
    (g,) = [r for r in gemms if isinstance(r, GemmRecord)]
    ok = _ok(seeds)
    rows = limit_rows(ok, g)
    out = [line for line in limit_markdown(rows).splitlines() if line.startswith("|NVIDIA")]
    by = {(r["impl"], r["precision"]): r["words_per_s"] for r in rows}
    for impl in ("fused", "loop"):
        out.append(f"{impl}: TF32 x{by[impl, 'tf32'] / by[impl, 'fp32']:.2f}, "
                   f"bf16 x{by[impl, 'bf16'] / by[impl, 'fp32']:.2f} over fp32")
    return out


def evidence_gpu_check(check: dict) -> list[str]:
    """gpu_check.sh's demo runs: np = 1 on the GPU, np = 2 with both ranks on it (ddp)."""
    return [f"| {r['rnn_impl']} | {r['np']} | {r['strategy']} | {r['words_per_s']:,.0f} |"
            for r in check["runs"] if "words_per_s" in r]


EVIDENCE_CHECKS = [
    ("issue 43 CPU scaling", ROUNDS, evidence_scaling),
    ("issue 43 CPU fit", ROUNDS, evidence_fit),
    ("issue 43 CPU fit, round 2's base", ROUNDS, evidence_fit_other_base),
    ("issue 43 start-up", (*ROUNDS, GPU + "seeds/results.jsonl"), evidence_startup),
    ("issue 43 seeds", (GPU + "seeds/results.jsonl", H100_GEMM), evidence_seeds),
    ("issue 43 gpu_check", (GPU + "gpu_check.json",), evidence_gpu_check),
]
"""(section, raw files under bench/results, the figures as BENCHMARKS.md prints them)."""
