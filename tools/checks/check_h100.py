"""BENCHMARKS.md's H100 section (issue 38), recomputed from the raw results in
``bench/results/h100_2026-11-27/`` (PROVENANCE.md there): ``check_benchmarks.py`` calls each
function below with its raw files' contents and looks for every returned line in the text.

Every figure there is a single run; the words/s, step times, counts and ratios are recomputed
from the records (the GEMM findings from the curve's own rows, the limit table by
``hvdscale.study.stepcost.gpu_limit`` itself).
"""

from __future__ import annotations

import re
import statistics

from hvdscale.records.experiment import plain
from hvdscale.records.failed import FailedRecord
from hvdscale.records.fields import Record
from hvdscale.records.gemm import GemmRecord
from hvdscale.records.profile import ProfileRecord
from hvdscale.records.run import RunRecord
from hvdscale.study.stepcost.gpu_limit import limit_rows
from hvdscale.study.stepcost.gpu_limit import markdown as limit_markdown
from hvdscale.study.stepcost.step_flops import achieved

H100 = "h100_2026-11-27/"
GPU, CPU = H100 + "gpu/", H100 + "cpu/"
NOTES = {"fused": (55411, 51046), "loop": (43398, 39369)}
"""Seed notes 000 / 001 words/s on one GPU (cudnn_lstm, dynamic_rnn)."""
NOTES_KERNELS = {"fused": 1281, "loop": 37644}
"""Seed note 000's kernels per step (cudnn_lstm, dynamic_rnn)."""


def _ok(recs: list[Record]) -> list[RunRecord]:
    return [r for r in recs if isinstance(r, RunRecord)]


def h100_seeds(seeds: list[Record], profile: list[Record]) -> list[str]:
    """The seed NMT fused vs loop at TF32 off: words/s, median step, kernels and operators per
    step, and where the profiled step's time went."""
    by = {r.model_config.rnn_impl: r for r in _ok(seeds) if r.config.tf32 == "off"}
    (prof,) = [p for p in profile if isinstance(p, ProfileRecord)]
    out = []
    for impl in ("fused", "loop"):
        r, p = by[impl], prof.impls[impl]
        n0, n1 = NOTES[impl]
        t = p["time_split"]
        step_ms = 1e3 * r.step_median_s
        out.append(f"| {impl} | {r.words_per_s:,.0f} | {step_ms:,.1f} "
                   f"| {n0:,} / {n1:,} | {p['ops']:,.0f} | {p['kernels']:,.0f} | "
                   f"{p['gpu_kernels']:,.0f} | {NOTES_KERNELS[impl]:,} | "
                   + " | ".join(f"{100 * t[k]:.0f} %" for k in ("rnn", "softmax", "rest"))
                   + " |")
    ratio = by["loop"].words_per_s / by["fused"].words_per_s
    out.append(f"loop / fused = {ratio:.3f} here, {NOTES['loop'][0] / NOTES['fused'][0]:.3f} "
               "in the seed notes")
    out.append(f"the step-by-step loop is {1 / ratio:.1f} times slower than cuDNN's fused kernel")
    kern = prof.impls["loop"]["gpu_kernels"] / prof.impls["fused"]["gpu_kernels"]
    out.append(f"launches {kern:.1f} times the fused step's GPU kernels (the notes: "
               f"{NOTES_KERNELS['loop'] / NOTES_KERNELS['fused']:.1f})")
    return out


def _rate(f: dict, hidden: int, batch: int) -> float:
    row = next(r for r in f["rows"] if (r["hidden"], r["variant"], r["batch"])
               == (hidden, "NN", batch))
    return row["gflops"] / 1e3


def h100_gemm(gemms: list[Record]) -> list[str]:
    """Per precision: the peak GEMM and NN points of the curve, then seed note 004's claims as
    the curve's own rows answer them."""
    (g,) = [r for r in gemms if isinstance(r, GemmRecord)]
    out = []
    for f in g.frameworks:
        p = f["precision"]
        cells = " | ".join(f"{_rate(f, h, b):.1f}" for h in (512, 2560) for b in (32, 256))
        grow = [x["x32_over_1"] for x in f["batch_growth"]]
        m32 = [v for x in f["batch_growth"] for v in x["multiples_of_32"].values()]
        consistent = sum(1 for x in f["pretranspose"] if x["consistent"])
        out.append(f"| {p} | {f['peak']['gflops'] / 1e3:.1f} | {cells} | "
                   f"x{min(grow):.1f} - x{max(grow):.1f} | {len(f['slower_with_larger_batch'])} | "
                   f"{sum(v > 1 for v in m32)} of {len(m32)} | "
                   f"{consistent} of {len(f['pretranspose'])} |")
    grow = [x["x32_over_1"] for f in g.frameworks for x in f["batch_growth"]]
    out.append(f"a batch of 32 runs {min(grow):.0f} to {max(grow):.0f} times the batch-1 rate")
    worst = max((d for f in g.frameworks for d in f["slower_with_larger_batch"]),
                key=lambda d: d["drop"])
    prec = next(f["precision"] for f in g.frameworks if worst in f["slower_with_larger_batch"])
    out.append(f"a step from {worst['from_batch']} to {worst['to_batch']} loses up to "
               f"{100 * worst['drop']:.0f} % in {prec}")
    return out


def h100_strategies(strategies: list[Record], check_log: str) -> list[str]:
    """configs/demo.yaml on the GPU: each strategy's words/s at np=1 and np=2 (both ranks on
    the one GPU; a failed point says failed), fused and loop; gpu_check's np=1 figures."""
    recs = [r for r in strategies if isinstance(r, RunRecord | FailedRecord)]
    out = []
    for impl in ("fused", "loop"):
        for s in ("horovod", "ps", "ddp", "independent"):
            cells = []
            for n in (1, 2):
                at = [r for r in recs if r.strategy_name == s and r.workers == n
                      and plain(r.config or {}).get("model", {}).get("rnn_impl") == impl]
                ok = [r.words_per_s for r in at if isinstance(r, RunRecord)]
                cells.append(f"{statistics.median(ok):,.0f}" if ok else
                             ("failed" if at else "not run"))
            out.append(f"| {impl} | {s} | {cells[0]} | {cells[1]} |")
    for impl, w in re.findall(r"gpu_check: demo (\w+) np=1: (\d+) words/s", check_log):
        out.append(f"gpu_check, demo {impl} np=1: {int(w):,} words/s")
    return out


def h100_cpu_round(demo: list[Record], load_log: str) -> list[str]:
    """evidence/many_cores.sh's round 1 of the demo on 12 cores beside GPU work: words/s per
    strategy and n, the speedup at the largest n, and the loads the round recorded."""
    recs = _ok(demo)
    ns = sorted({r.workers for r in recs})
    out = []
    for s in sorted({r.strategy_name for r in recs}):
        w = {n: statistics.median(r.words_per_s for r in recs if r.workers == n
                                  and r.strategy_name == s) for n in ns}
        cells = " | ".join(f"{w[n]:,.0f}" for n in ns)
        out.append(f"| {s} | {cells} | {w[ns[-1]] / w[ns[0]]:.2f} |")
    loads = [float(x) for x in re.findall(r"round 1 demo (?:before|after) ([\d.]+)", load_log)]
    rec_loads = [r.loadavg[0] for r in recs if r.loadavg]
    out.append(f"1-minute load {loads[0]:.2f} before the round, {loads[-1]:.2f} after it "
               f"(at the points: {min(rec_loads):.2f} - {max(rec_loads):.2f}); not quiet")
    return out


def h100_fit_validation(demo: list[Record]) -> list[str]:
    """``predict --fit`` on the round's n <= 4 (1, 2, 4: n = 3 not measured) against its n = 6
    and 8, as ``evidence/many_cores_report.py`` computes it."""
    from many_cores_report import validation_rows

    rows = validation_rows("demo", [_ok(demo)], 4)
    bad = [r["error"] for r in rows if "error" in r]
    if bad:
        return [f"fit failed: {e}" for e in bad]
    return [f"| {r['strategy']} | {r['n']} | {r['measured_words_per_s']:,.0f} | "
            f"{r['predicted_words_per_s']:,.0f} | {100 * (r['ratio'] - 1):+.1f} % | "
            f"{r['most_wrong_term']} |" for r in rows]


def h100_limit(seeds: list[Record], gemms: list[Record]) -> list[str]:
    """The limit table's rows as ``python -m hvdscale.study.stepcost.gpu_limit`` prints them."""
    (g,) = [r for r in gemms if isinstance(r, GemmRecord)]
    ok = _ok(seeds)
    rows = limit_rows(ok, g)
    out = [line for line in limit_markdown(rows).splitlines() if line.startswith("|NVIDIA")]
    # the old reference: the whole fused step's useful TFLOP/s over one per-time-step GEMM
    # (hidden 512, NN, the curve's batch nearest 384: 256)
    fused = next(r for r in ok if r.model_config.rnn_impl == "fused")
    fp32 = next(f for f in g.frameworks if f["precision"] == "fp32")
    old = achieved(fused)["tflops_per_rank"] / _rate(fp32, 512, 256)
    return [*out, f"one per-time-step GEMM and read {100 * old:.0f} %"]


def _span(recs: list[RunRecord] | list[Record]) -> str:
    """HH:MM:SS of the first start and the last finish among ``recs`` (UTC)."""
    return (f"{min(r.started for r in recs)[11:19]} to "
            f"{max(r.finished for r in recs)[11:19]}")


def h100_overlap(demo: list[Record], profile: list[Record], gemm: list[Record]) -> list[str]:
    """When the CPU round's points ran against the GPU stages that recorded their times
    (issue 50: loan 1's n = 8 miss was blamed on GPU work alongside)."""
    ok = _ok(demo)
    out = [f"n = {n}: {_span([r for r in ok if r.workers == n])}" for n in (2, 4, 6, 8)]
    return [*out, f"profile {_span(profile)}", f"GEMM {_span(gemm)}"]


H100_CHECKS = [
    ("issue 38 H100 overlap", (CPU + "round1/demo/results.jsonl", GPU + "profile/results.jsonl",
                               GPU + "gemm/results.jsonl"), h100_overlap),
    ("issue 38 H100 seed NMT", (GPU + "seeds/results.jsonl", GPU + "profile/results.jsonl"),
     h100_seeds),
    ("issue 38 H100 GEMM curves", (GPU + "gemm/results.jsonl",), h100_gemm),
    ("issue 38 H100 demo strategies", (GPU + "strategies/results.jsonl", GPU + "gpu_check.log"),
     h100_strategies),
    ("issue 38 H100 CPU round", (CPU + "round1/demo/results.jsonl", CPU + "load.log"),
     h100_cpu_round),
    ("issue 38 H100 CPU round fit", (CPU + "round1/demo/results.jsonl",), h100_fit_validation),
    ("issue 38 H100 limit", (GPU + "seeds/results.jsonl", GPU + "gemm/results.jsonl"),
     h100_limit),
]
"""(section, raw files under bench/results, the figures as BENCHMARKS.md prints them)."""
