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
set explicitly (default 1) before the framework starts and recorded."""

from __future__ import annotations

import importlib
import importlib.util
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
from hvdscale.records.schema import SCHEMA_VERSION
from hvdscale.registry import FRAMEWORKS, LIBRARIES, check_framework
from hvdscale.study.plotting import figure
from hvdscale.study.stepcost.gemm_findings import (
    batch_growth,
    findings_text,
    pretranspose_wins,
    result_label,
    slower_with_larger_batch,
)
from hvdscale.study.sweep.names import parse_names

VARIANTS = ("NN", "TN", "NT")
DEFAULT_HIDDEN = "512,1024"
# Powers of two and every multiple of 32 up to 256 with its neighbours.
DEFAULT_BATCH = "1,2,4,8,16,31,32,33,63,64,65,95,96,97,127,128,129,160,192,224,255,256"
MAX_SIZE = 65536


@dataclass(frozen=True)
class GemmSpec:
    """What to time and how: the options of ``hvdscale gemm`` after parsing."""

    hidden: list[int]
    batch: list[int]
    threads: int = 1
    gates: int = 4
    repeats: int = 5
    warmup: int = 2
    min_time_s: float = 0.02
    peak_size: int = 2048
    clock: str = "auto"
    device: str = "cpu"
    """``cpu`` or ``cuda`` (PyTorch only): where the products run."""
    precisions: tuple[str, ...] = ("fp32",)
    """Each timed in turn: ``fp32``, ``tf32`` (GPU tensor cores), ``bf16``."""


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


PRECISIONS = ("fp32", "tf32", "bf16")  # as frameworks.torch.gemm, without importing torch


def parse_precisions(text: str) -> list[str]:
    """``"fp32,tf32"`` -> ``["fp32", "tf32"]``; an unknown name is an error."""
    return parse_names(text, PRECISIONS, "--precision", "precision")


def parse_frameworks(text: str) -> list[str]:
    """``"torch,tf"`` -> ``["torch", "tf"]``; an unknown name is an error."""
    return parse_names(text, FRAMEWORKS, "--framework", "framework")


# --- framework back ends: build operands once, return a callable that runs one product --------

Prepare = Callable[[Layout], Callable[[], object]]


def _set_thread_env(threads: int) -> None:
    # Read once when the math libraries start, so set before any framework import.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "TF_NUM_INTRAOP_THREADS"):
        os.environ[var] = str(threads)


def load_backend(framework: str) -> Callable[[int], Callable[..., Callable[[], object]]]:
    """``hvdscale.frameworks.<framework>.gemm.backend``: given a thread count, it returns
    ``prepare(a_shape, b_shape, ta, tb)``. It imports the framework: set the thread
    environment first (``_set_thread_env``).

    Raises:
        ValueError: an unknown framework. HvdscaleError: its library is not installed.
    """
    check_framework(framework, "--framework")
    try:
        module = importlib.import_module(f"hvdscale.frameworks.{framework}.gemm")
    except ModuleNotFoundError as e:
        missing = (e.name or "").partition(".")[0]
        if missing in ("", "hvdscale"):
            raise
        raise HvdscaleError(f"--framework {framework}: {missing} is not installed") from None
    return module.backend


def _check_installed(framework: str) -> None:
    """A registered framework whose library is installed, found without importing it (a
    framework imported before another is timed could change that one's figures)."""
    check_framework(framework, "--framework")
    library = LIBRARIES[framework]
    if importlib.util.find_spec(library) is None:
        raise HvdscaleError(f"--framework {framework}: {library} is not installed")


CLOCKS = ("auto", "wall", "cpu")
_clock: Callable[[], float] = time.perf_counter
_sync: Callable[[], None] = lambda: None  # noqa: E731  (the device's wait; a no-op on CPU)


def resolve_clock(clock: str, threads: int, device: str = "cpu") -> str:
    """``auto``: the process's CPU time with one thread, wall time with more or on a GPU.

    On a shared machine other processes take turns on the core; wall time then counts their
    turns too, while the CPU time of this process counts only its own work. With several
    threads CPU time adds the threads up, so only wall time gives their joint speed; a GPU's
    work is not this process's CPU time at all.
    """
    if clock not in CLOCKS:
        raise HvdscaleError(f"--clock must be one of {', '.join(CLOCKS)} (got {clock!r})")
    if device != "cpu":
        if clock == "cpu":
            raise HvdscaleError("--clock cpu cannot time GPU work: use wall or auto")
        return "wall"
    if clock == "auto":
        return "cpu" if threads == 1 else "wall"
    return clock


def _calls_for(fn: Callable[[], object], min_time_s: float) -> int:
    """Calls per timed repeat so that one repeat lasts about ``min_time_s``."""
    _sync()
    t0 = _clock()
    fn()
    _sync()
    one = max(_clock() - t0, 1e-7)
    return max(1, int(min_time_s / one + 0.5))


def _time(fn: Callable[[], object], calls: int) -> float:
    _sync()  # nothing queued before the clock starts, all of it done before it stops
    t0 = _clock()
    for _ in range(calls):
        fn()
    _sync()
    return (_clock() - t0) / calls


def measure_peak(prepare: Prepare, size: int, repeats: int = 3) -> dict[str, float]:
    """Best GFLOP/s of a square ``size`` GEMM (after one warm-up call)."""
    fn = prepare(Layout((size, size), (size, size), False, False))
    fn()
    best = min(_time(fn, 1) for _ in range(repeats))
    return {"size": size, "time_s": best, "gflops": flops(size, size, size) / best / 1e9}


def _time_point(prepare: Prepare, hidden: int, batch: int, spec: GemmSpec,
                peak_gflops: float) -> list[dict[str, Any]]:
    """The rows of one (hidden, batch) point: every variant and its twin, timed interleaved."""
    m, n, k = spec.gates * hidden, batch, hidden
    calls: list[Callable[[], object]] = []
    for v in VARIANTS:
        calls.extend(prepare(lay) for lay in layouts(v, m, n, k))
    for fn in calls:  # warm-up: first-touch, allocator, library dispatch
        for _ in range(spec.warmup):
            fn()
    counts = [_calls_for(fn, spec.min_time_s) for fn in calls]
    samples: list[list[float]] = [[] for _ in calls]
    for r in range(spec.repeats):
        # Interleaved, order rotated per repeat: machine noise hits all six alike.
        order = list(range(len(calls)))
        order = order[r % len(order):] + order[: r % len(order)]
        for i in order:
            samples[i].append(_time(calls[i], counts[i]))
    f = flops(m, n, k)
    rows = []
    for j, v in enumerate(VARIANTS):
        own, twin = samples[2 * j], samples[2 * j + 1]
        t, tt = statistics.median(own), statistics.median(twin)
        rows.append({
            "hidden": hidden, "batch": batch, "variant": v, "M": m, "N": n, "K": k,
            "flops": f, "calls_per_repeat": counts[2 * j], "times_s": own,
            "time_s": t, "gflops": f / t / 1e9, "frac_peak": f / t / 1e9 / peak_gflops,
            "twin_times_s": twin, "twin_time_s": tt, "twin_gflops": f / tt / 1e9,
            "twin_wins": sum(x < y for x, y in zip(twin, own, strict=True)),
        })
    return rows


def _device_backend(framework: str, spec: GemmSpec,
                    precision: str) -> Callable[..., Callable[[], object]]:
    """The framework's preparer for ``spec.device`` and ``precision``; sets ``_sync``
    (HvdscaleError: a GPU or a precision other than fp32 asked of TensorFlow)."""
    global _sync
    make = load_backend(framework)
    if spec.device == "cpu" and precision == "fp32":
        _sync = lambda: None  # noqa: E731
        return make(spec.threads)
    if framework != "torch":
        raise HvdscaleError(f"--device {spec.device} --precision {precision}: only --framework "
                            "torch times GEMMs on a GPU or in other precisions")
    module = importlib.import_module("hvdscale.frameworks.torch.gemm")
    prepare = make(spec.threads, spec.device, precision)
    _sync = module.synchronizer(spec.device)
    return prepare


def measure_framework(framework: str, spec: GemmSpec, say: Callable[[str], None] | None = None,
                      precision: str = "fp32") -> dict[str, Any]:
    """Time every variant and its twin at each (hidden, batch) point for one framework.

    Returns:
        ``{"framework", "device", "precision", "clock", "peak": {...}, "rows": [...]}``; one row
        per (hidden, batch, variant) with median seconds, GFLOP/s, fraction of peak and the
        twin's figures.
    """
    global _clock
    used = resolve_clock(spec.clock, spec.threads, spec.device)
    _clock = time.process_time if used == "cpu" else time.perf_counter
    make = _device_backend(framework, spec, precision)

    def prepare(lay: Layout) -> Callable[[], object]:
        return make(lay.a, lay.b, lay.ta, lay.tb)

    peak = measure_peak(prepare, spec.peak_size)
    rows = []
    for h in spec.hidden:
        for b in spec.batch:
            rows += _time_point(prepare, h, b, spec, peak["gflops"])
            if say:
                g = {r["variant"]: r["gflops"] for r in rows[-3:]}
                say(f"  {framework} hidden={h} batch={b}: NN {g['NN']:.1f} TN {g['TN']:.1f} "
                    f"NT {g['NT']:.1f} GFLOP/s")
    return {"framework": framework, "device": spec.device, "precision": precision,
            "clock": used, "peak": peak, "rows": rows}


# --- the command ----------------------------------------------------------------------------------

def run_gemm(frameworks: list[str], spec: GemmSpec,
             say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Measure every framework and return one record (``kind: gemm``) with the findings.

    Raises:
        HvdscaleError: bad sizes or counts, or a framework that is not installed.
    """
    for name, val, low in (("--threads", spec.threads, 1), ("--gates", spec.gates, 1),
                           ("--repeats", spec.repeats, 1), ("--warmup", spec.warmup, 0),
                           ("--peak-size", spec.peak_size, 1)):
        if not isinstance(val, int) or val < low:
            raise HvdscaleError(f"{name} must be an integer >= {low} (got {val!r})")
    used = resolve_clock(spec.clock, spec.threads, spec.device)
    _set_thread_env(spec.threads)
    for fw in frameworks:  # every framework installed before the first is measured
        _check_installed(fw)
    from hvdscale.records.provenance import git_revision, versions

    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = os.getloadavg()
    results = []
    for fw, prec in ((f, p) for f in frameworks for p in spec.precisions):
        if say:
            say(f"hvdscale gemm: {fw} {prec} on {spec.device}, {spec.threads} thread(s), "
                f"hidden {spec.hidden}, batch {spec.batch}")
        res = measure_framework(fw, spec, say, prec)
        res["slower_with_larger_batch"] = slower_with_larger_batch(res["rows"])
        res["pretranspose"] = pretranspose_wins(res["rows"])
        res["batch_growth"] = batch_growth(res["rows"])
        results.append(res)
    return {
        "schema": SCHEMA_VERSION, "kind": "gemm", "status": "ok", "started": started,
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": socket.gethostname(), "threads": spec.threads, "clock": used,
        "device": spec.device, "precisions": list(spec.precisions),
        "gates": spec.gates, "repeats": spec.repeats, "warmup": spec.warmup,
        "min_time_s": spec.min_time_s, "hidden": spec.hidden, "batch": spec.batch,
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
            lines += [f"### {result_label(res)}, hidden {h} (peak {peak['gflops']:.1f} GFLOP/s "
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


def plot(rec: dict[str, Any], out_dir: Path) -> list[Path]:
    """One PNG per framework: GFLOP/s vs batch per variant (dashed: pre-transposed twin)."""
    written = []
    for res in rec["frameworks"]:
        hs = sorted({r["hidden"] for r in res["rows"]})
        path = out_dir / f"gemm_{result_label(res, '_')}.png"
        with figure(path, 1, len(hs), figsize=(5.5 * len(hs), 4.2), squeeze=False) as (_, axes):
            for ax, h in zip(axes[0], hs, strict=True):
                for v in VARIANTS:
                    rs = sorted((r for r in res["rows"]
                                 if r["hidden"] == h and r["variant"] == v),
                                key=lambda r: r["batch"])
                    xs = [r["batch"] for r in rs]
                    line, = ax.plot(xs, [r["gflops"] for r in rs], marker="o", ms=3, label=v)
                    ax.plot(xs, [r["twin_gflops"] for r in rs], ls="--", lw=1,
                            color=line.get_color(), alpha=0.7, label=f"{v} pre-transposed")
                ax.axhline(res["peak"]["gflops"], color="grey", ls=":", lw=1, label="peak")
                for x in range(32, max(rec["batch"]) + 1, 32):
                    ax.axvline(x, color="grey", lw=0.4, alpha=0.4)
                ax.set(xlabel="batch (N)", ylabel="GFLOP/s",
                       title=f"{result_label(res)} hidden {h}, {rec['threads']} thread(s)")
                ax.grid(alpha=0.3)
                ax.legend(fontsize=7)
        written.append(path)
    return written

