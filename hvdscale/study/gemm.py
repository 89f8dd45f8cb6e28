"""``hvdscale gemm``: how fast are the three GEMMs of an RNN layer at each batch size?

An LSTM layer with hidden size H and per-rank batch B multiplies a weight W [M x K] (M = gates x
H, K = H; gates = 4 for an LSTM, 1 for the plain RNN of the seed notes) with activations of
width N = B. The seed notes name three products, in the framework's (row-major) terms:

* ``NN``: forward, Y[M,N] = W[M,K] . X[K,N] (the notes' Wx and Uh);
* ``TN``: backward data gradient, W^T . D with D[M,N] (U^T delta, W^T delta);
* ``NT``: weight gradient, D[M,N] . X^T (delta h^T, delta x^T).

Each costs 2MNK flops. Every product is also timed with its transposed operand stored the other
way round ("pre-transposed": for NN, W kept as W^T and multiplied with a transpose flag; for TN
and NT, the operand materialised transposed so the call needs no flag). When a variant is
consistently slower than its pre-transposed twin, keeping a transposed copy of the weight pays.

Timing: per (hidden, batch) point the six layouts are timed interleaved, the order rotated each
repeat, after a warm-up; each repeat runs enough calls to last ``min_time_s``; the median over
repeats is reported. With one thread the clock is this process's CPU time by default (other
processes' turns on a shared core do not count), with more threads wall time. The peak is the
best GFLOP/s of a large square GEMM measured in the same run, with the same clock. Threads are
set explicitly (default 1) before the framework starts and recorded.
"""

from __future__ import annotations

import itertools
import os
import socket
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hvdscale.errors import HvdscaleError

VARIANTS = ("NN", "TN", "NT")
GEMM_FRAMEWORKS = ("torch", "tf")
DEFAULT_HIDDEN = "512,1024"
# Powers of two and every multiple of 32 up to 256 with its neighbours.
DEFAULT_BATCH = "1,2,4,8,16,31,32,33,63,64,65,95,96,97,127,128,129,160,192,224,255,256"
MAX_SIZE = 65536
SLOWER_MARGIN = 0.05  # a drop or a twin's win smaller than this is within the noise here
CONSISTENT_SHARE = 0.75  # "consistently": at this share of a hidden size's batch sizes


@dataclass(frozen=True)
class Layout:
    """One matmul call: operand shapes and transpose flags."""

    a: tuple[int, int]
    b: tuple[int, int]
    ta: bool
    tb: bool


def layouts(variant: str, m: int, n: int, k: int) -> tuple[Layout, Layout]:
    """(the variant's call, its pre-transposed twin) for a [M x K] weight and N columns."""
    if variant == "NN":
        return Layout((m, k), (k, n), False, False), Layout((k, m), (k, n), True, False)
    if variant == "TN":
        return Layout((m, k), (m, n), True, False), Layout((k, m), (m, n), False, False)
    if variant == "NT":
        return Layout((m, n), (k, n), False, True), Layout((m, n), (n, k), False, False)
    raise HvdscaleError(f"unknown GEMM variant {variant!r}; choose from {', '.join(VARIANTS)}")


def flops(m: int, n: int, k: int) -> int:
    """Floating-point operations of one M x N x K product (a multiply and an add each)."""
    return 2 * m * n * k


def parse_sizes(text: str, option: str) -> list[int]:
    """``"16,32,64"`` -> ``[16, 32, 64]`` (sorted, no repeats).

    Raises:
        HvdscaleError: empty, not an integer, < 1 or > 65536.
    """
    items = [t.strip() for t in str(text).split(",")]
    if not any(items):
        raise HvdscaleError(f"{option} needs a comma-separated list of positive sizes "
                            f"(got {text!r})")
    out = set()
    for t in items:
        if not t.isdigit() or not 1 <= int(t) <= MAX_SIZE:
            raise HvdscaleError(f"{option} entries must be integers from 1 to {MAX_SIZE} "
                                f"(got {t!r} in {text!r})")
        out.add(int(t))
    return sorted(out)


def parse_frameworks(text: str) -> list[str]:
    """``"torch,tf"`` -> ``["torch", "tf"]``; an unknown name is an error."""
    out: list[str] = []
    for t in (s.strip() for s in str(text).split(",")):
        if t not in GEMM_FRAMEWORKS:
            raise HvdscaleError(f"--framework: unknown framework {t!r}; choose from "
                                f"{', '.join(GEMM_FRAMEWORKS)}")
        if t not in out:
            out.append(t)
    return out


# --- framework back ends: build operands once, return a callable that runs one product --------

def _set_thread_env(threads: int) -> None:
    # Read once when the math libraries start, so set before any framework import.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "TF_NUM_INTRAOP_THREADS"):
        os.environ[var] = str(threads)


def _torch_backend(threads: int) -> Callable[[Layout], Callable[[], object]]:
    import torch

    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)

    def prepare(lay: Layout) -> Callable[[], object]:
        a = torch.randn(*lay.a, generator=gen)
        b = torch.randn(*lay.b, generator=gen)
        # .t() is a strided view: torch hands BLAS a transpose flag, no copy is made.
        a_ = a.t() if lay.ta else a
        b_ = b.t() if lay.tb else b
        out = torch.empty(a_.shape[0], b_.shape[1])
        return lambda: torch.mm(a_, b_, out=out)

    return prepare


def _tf_backend(threads: int) -> Callable[[Layout], Callable[[], object]]:
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:  # TF already started in this process: only fine if it agrees
        if tf.config.threading.get_intra_op_parallelism_threads() != threads:
            raise HvdscaleError("TensorFlow was started with another thread count before "
                                "hvdscale gemm could set it") from None
    gen = tf.random.Generator.from_seed(0)

    def prepare(lay: Layout) -> Callable[[], object]:
        a = gen.normal(lay.a)
        b = gen.normal(lay.b)
        # Eager on CPU runs synchronously: the call returns when the product is done.
        return lambda: tf.linalg.matmul(a, b, transpose_a=lay.ta, transpose_b=lay.tb)

    return prepare


BACKENDS: dict[str, Callable[[int], Callable[[Layout], Callable[[], object]]]] = {
    "torch": _torch_backend, "tf": _tf_backend}


CLOCKS = ("auto", "wall", "cpu")
_clock: Callable[[], float] = time.perf_counter


def resolve_clock(clock: str, threads: int) -> str:
    """``auto``: the process's CPU time with one thread, wall time with more.

    On a shared machine other processes take turns on the core; wall time then counts their
    turns too, while the CPU time of this process counts only its own work. With several
    threads CPU time adds the threads up, so only wall time gives their joint speed.
    """
    if clock not in CLOCKS:
        raise HvdscaleError(f"--clock must be one of {', '.join(CLOCKS)} (got {clock!r})")
    if clock == "auto":
        return "cpu" if threads == 1 else "wall"
    return clock


def _calls_for(fn: Callable[[], object], min_time_s: float) -> int:
    """Calls per timed repeat so that one repeat lasts about ``min_time_s``."""
    t0 = _clock()
    fn()
    one = max(_clock() - t0, 1e-7)
    return max(1, int(min_time_s / one + 0.5))


def _time(fn: Callable[[], object], calls: int) -> float:
    t0 = _clock()
    for _ in range(calls):
        fn()
    return (_clock() - t0) / calls


def measure_peak(prepare: Callable[[Layout], Callable[[], object]], size: int,
                 repeats: int = 3) -> dict[str, float]:
    """Best GFLOP/s of a square ``size`` GEMM (after one warm-up call)."""
    fn = prepare(Layout((size, size), (size, size), False, False))
    fn()
    best = min(_time(fn, 1) for _ in range(repeats))
    return {"size": size, "time_s": best, "gflops": flops(size, size, size) / best / 1e9}


def measure_framework(framework: str, hidden: list[int], batch: list[int], threads: int = 1,
                      gates: int = 4, repeats: int = 5, warmup: int = 2,
                      min_time_s: float = 0.02, peak_size: int = 2048,
                      say: Callable[[str], None] | None = None,
                      clock: str = "auto") -> dict[str, Any]:
    """Time every variant and its twin at each (hidden, batch) point for one framework.

    Returns:
        ``{"framework", "clock", "peak": {...}, "rows": [...]}``; one row per (hidden, batch,
        variant) with median seconds, GFLOP/s, fraction of peak and the twin's figures.
    """
    global _clock
    used = resolve_clock(clock, threads)
    _clock = time.process_time if used == "cpu" else time.perf_counter
    prepare = BACKENDS[framework](threads)
    peak = measure_peak(prepare, peak_size)
    rows = []
    for h in hidden:
        m, k = gates * h, h
        for b in batch:
            n = b
            calls: list[Callable[[], object]] = []
            for v in VARIANTS:
                calls.extend(prepare(lay) for lay in layouts(v, m, n, k))
            for fn in calls:  # warm-up: first-touch, allocator, library dispatch
                for _ in range(warmup):
                    fn()
            counts = [_calls_for(fn, min_time_s) for fn in calls]
            samples: list[list[float]] = [[] for _ in calls]
            for r in range(repeats):
                # Interleaved, order rotated per repeat: machine noise hits all six alike.
                order = list(range(len(calls)))
                order = order[r % len(order):] + order[: r % len(order)]
                for i in order:
                    samples[i].append(_time(calls[i], counts[i]))
            f = flops(m, n, k)
            for j, v in enumerate(VARIANTS):
                own, twin = samples[2 * j], samples[2 * j + 1]
                t, tt = statistics.median(own), statistics.median(twin)
                rows.append({
                    "hidden": h, "batch": b, "variant": v, "M": m, "N": n, "K": k,
                    "flops": f, "calls_per_repeat": counts[2 * j], "times_s": own,
                    "time_s": t, "gflops": f / t / 1e9, "frac_peak": f / t / 1e9 / peak["gflops"],
                    "twin_times_s": twin, "twin_time_s": tt, "twin_gflops": f / tt / 1e9,
                    "twin_wins": sum(x < y for x, y in zip(twin, own, strict=True)),
                })
            if say:
                g = {r["variant"]: r["gflops"] for r in rows[-3:]}
                say(f"  {framework} hidden={h} batch={b}: NN {g['NN']:.1f} TN {g['TN']:.1f} "
                    f"NT {g['NT']:.1f} GFLOP/s")
    return {"framework": framework, "clock": used, "peak": peak, "rows": rows}


# --- findings ------------------------------------------------------------------------------------

def slower_with_larger_batch(rows: list[dict[str, Any]],
                             margin: float = SLOWER_MARGIN) -> list[dict[str, Any]]:
    """Consecutive batch sizes where the larger one runs at lower GFLOP/s by > ``margin``."""
    out = []
    keys = sorted({(r["hidden"], r["variant"]) for r in rows})
    for h, v in keys:
        pts = sorted((r["batch"], r["gflops"]) for r in rows
                     if r["hidden"] == h and r["variant"] == v)
        for (b0, g0), (b1, g1) in itertools.pairwise(pts):
            if g1 < g0 * (1 - margin):
                out.append({"hidden": h, "variant": v, "from_batch": b0, "to_batch": b1,
                            "gflops_from": g0, "gflops_to": g1, "drop": 1 - g1 / g0})
    return out


def pretranspose_wins(rows: list[dict[str, Any]],
                      margin: float = SLOWER_MARGIN) -> list[dict[str, Any]]:
    """Per (hidden, variant): the batch sizes where the pre-transposed twin is faster by more
    than ``margin`` (median) and in most paired repeats; ``consistent`` when that holds at
    ``CONSISTENT_SHARE`` of the hidden size's batch sizes."""
    out = []
    for h, v in sorted({(r["hidden"], r["variant"]) for r in rows}):
        rs = [r for r in rows if r["hidden"] == h and r["variant"] == v]
        wins = [r["batch"] for r in rs
                if r["twin_time_s"] < r["time_s"] * (1 - margin)
                and 2 * r["twin_wins"] > len(r["twin_times_s"])]
        if wins:
            speedup = statistics.median(r["time_s"] / r["twin_time_s"] for r in rs
                                        if r["batch"] in wins)
            out.append({"hidden": h, "variant": v, "batches": wins, "of": len(rs),
                        "median_speedup": speedup,
                        "consistent": len(wins) >= CONSISTENT_SHARE * len(rs)})
    return out


# --- the command ----------------------------------------------------------------------------------

def run_gemm(frameworks: list[str], hidden: list[int], batch: list[int], threads: int = 1,
             gates: int = 4, repeats: int = 5, warmup: int = 2, min_time_s: float = 0.02,
             peak_size: int = 2048, say: Callable[[str], None] | None = None,
             clock: str = "auto") -> dict[str, Any]:
    """Measure every framework and return one record (``kind: gemm``) with the findings.

    Raises:
        HvdscaleError: bad sizes or counts, or a framework that is not installed.
    """
    for name, val, low in (("--threads", threads, 1), ("--gates", gates, 1),
                           ("--repeats", repeats, 1), ("--warmup", warmup, 0),
                           ("--peak-size", peak_size, 1)):
        if not isinstance(val, int) or val < low:
            raise HvdscaleError(f"{name} must be an integer >= {low} (got {val!r})")
    used = resolve_clock(clock, threads)
    import importlib.util

    for fw in frameworks:
        mod = "tensorflow" if fw == "tf" else "torch"
        if importlib.util.find_spec(mod) is None:
            raise HvdscaleError(f"--framework {fw}: {mod} is not installed")
    from hvdscale.records.provenance import git_revision, versions

    _set_thread_env(threads)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = os.getloadavg()
    results = []
    for fw in frameworks:
        if say:
            say(f"hvdscale gemm: {fw}, {threads} thread(s), hidden {hidden}, batch {batch}")
        res = measure_framework(fw, hidden, batch, threads, gates, repeats, warmup,
                                min_time_s, peak_size, say, used)
        res["slower_with_larger_batch"] = slower_with_larger_batch(res["rows"])
        res["pretranspose"] = pretranspose_wins(res["rows"])
        results.append(res)
    return {
        "schema": 1, "kind": "gemm", "status": "ok", "started": started,
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": socket.gethostname(), "threads": threads, "clock": used, "gates": gates,
        "repeats": repeats,
        "warmup": warmup, "min_time_s": min_time_s, "hidden": hidden, "batch": batch,
        "loadavg": {"before": list(load_before), "after": list(os.getloadavg())},
        "versions": versions(), "git": git_revision(), "frameworks": results,
    }


def markdown(rec: dict[str, Any]) -> str:
    """The GEMM tables (GFLOP/s; twin = pre-transposed) and the findings, as Markdown."""
    lines = [f"## GEMM of an RNN layer (M={rec['gates']}xhidden, K=hidden, N=batch; "
             f"{rec['threads']} thread(s), {rec.get('clock', 'wall')} clock, median of "
             f"{rec['repeats']}; "
             f"loadavg {rec['loadavg']['before'][0]:.2f})", ""]
    for res in rec["frameworks"]:
        peak = res["peak"]
        for h in sorted({r["hidden"] for r in res["rows"]}):
            lines += [f"### {res['framework']}, hidden {h} (peak {peak['gflops']:.1f} GFLOP/s "
                      f"= {peak['size']}^3 GEMM)", "",
                      "|batch|NN|TN|NT|NN pre-T|TN pre-T|NT pre-T|NN % peak|TN % peak|"
                      "NT % peak|", "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
            by = {(r["batch"], r["variant"]): r for r in res["rows"] if r["hidden"] == h}
            for b in sorted({bb for bb, _ in by}):
                rs = [by[(b, v)] for v in VARIANTS]
                cells = [f"{r['gflops']:.1f}" for r in rs]
                cells += [f"{r['twin_gflops']:.1f}" for r in rs]
                cells += [f"{100 * r['frac_peak']:.0f}" for r in rs]
                lines.append(f"|{b}|" + "|".join(cells) + "|")
            lines.append("")
        lines += [*findings_text(res), ""]
    return "\n".join(lines)


def findings_text(res: dict[str, Any]) -> list[str]:
    """The batch sizes where a larger batch is slower, and where pre-transposing helps."""
    fw = res["framework"]
    out = []
    drops = res["slower_with_larger_batch"]
    if drops:
        for h in sorted({d["hidden"] for d in drops}):
            items = ", ".join(f"{d['variant']} {d['from_batch']}->{d['to_batch']} "
                              f"(-{100 * d['drop']:.0f}%)" for d in drops if d["hidden"] == h)
            out.append(f"- {fw} hidden {h}: a larger batch is slower (GFLOP/s) at {items}")
    else:
        out.append(f"- {fw}: no larger batch ran at lower GFLOP/s (beyond "
                   f"{100 * SLOWER_MARGIN:.0f}%)")
    wins = res["pretranspose"]
    for w in wins:
        how = "consistently" if w["consistent"] else "at some sizes"
        out.append(f"- {fw} hidden {w['hidden']}: {w['variant']} is {how} slower than its "
                   f"pre-transposed twin ({len(w['batches'])}/{w['of']} batch sizes: "
                   f"{', '.join(map(str, w['batches']))}; x{w['median_speedup']:.2f} median): "
                   f"{_advice(w['variant'])}")
    if not wins:
        out.append(f"- {fw}: no variant slower than its pre-transposed twin (beyond "
                   f"{100 * SLOWER_MARGIN:.0f}%)")
    return out


def _advice(variant: str) -> str:
    return {"NN": "keep the weight stored transposed for the forward",
            "TN": "keep a transposed copy of the weight for the backward",
            "NT": "materialise the activations transposed for the weight gradient"}[variant]


def plot(rec: dict[str, Any], out_dir: Path) -> list[Path]:
    """One PNG per framework: GFLOP/s vs batch per variant (dashed: pre-transposed twin)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for res in rec["frameworks"]:
        hs = sorted({r["hidden"] for r in res["rows"]})
        fig, axes = plt.subplots(1, len(hs), figsize=(5.5 * len(hs), 4.2), squeeze=False)
        for ax, h in zip(axes[0], hs, strict=True):
            for v in VARIANTS:
                rs = sorted((r for r in res["rows"] if r["hidden"] == h and r["variant"] == v),
                            key=lambda r: r["batch"])
                xs = [r["batch"] for r in rs]
                line, = ax.plot(xs, [r["gflops"] for r in rs], marker="o", ms=3, label=v)
                ax.plot(xs, [r["twin_gflops"] for r in rs], ls="--", lw=1,
                        color=line.get_color(), alpha=0.7, label=f"{v} pre-transposed")
            ax.axhline(res["peak"]["gflops"], color="grey", ls=":", lw=1, label="peak")
            for x in range(32, max(rec["batch"]) + 1, 32):
                ax.axvline(x, color="grey", lw=0.4, alpha=0.4)
            ax.set(xlabel="batch (N)", ylabel="GFLOP/s",
                   title=f"{res['framework']} hidden {h}, {rec['threads']} thread(s)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        fig.tight_layout()
        path = out_dir / f"gemm_{res['framework']}.png"
        tmp = path.with_name(f".{path.name}.tmp")
        fig.savefig(tmp, format="png", dpi=110)
        plt.close(fig)
        os.replace(tmp, path)
        written.append(path)
    return written
