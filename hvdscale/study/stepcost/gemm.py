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

The back ends, the clock and the timed calls are ``gemm_timing``'s; what the rows show,
``gemm_findings``'; the tables and plots, ``gemm_report``'s."""

from __future__ import annotations

import os
import socket
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hvdscale.errors import HvdscaleError
from hvdscale.records.gemm import GemmRecord
from hvdscale.records.study import LoadPair
from hvdscale.registry import FRAMEWORKS
from hvdscale.study.stepcost.gemm_findings import (
    batch_growth,
    pretranspose_wins,
    slower_with_larger_batch,
)
from hvdscale.study.stepcost.gemm_timing import (
    Layout,
    Prepare,
    calls_for,
    check_installed,
    device_backend,
    flops,
    measure_peak,
    resolve_clock,
    set_thread_env,
    time_calls,
    use_clock,
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


def layouts(variant: str, m: int, n: int, k: int) -> tuple[Layout, Layout]:
    """(the variant's call, its pre-transposed twin) for a [M x K] weight and N columns."""
    if variant == "NN":
        return Layout((m, k), (k, n), False, False), Layout((k, m), (k, n), True, False)
    if variant == "TN":
        return Layout((m, k), (m, n), True, False), Layout((k, m), (m, n), False, False)
    if variant == "NT":
        return Layout((m, n), (k, n), False, True), Layout((m, n), (n, k), False, False)
    raise HvdscaleError(f"unknown GEMM variant {variant!r}; choose from {', '.join(VARIANTS)}")


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
    counts = [calls_for(fn, spec.min_time_s) for fn in calls]
    samples: list[list[float]] = [[] for _ in calls]
    for r in range(spec.repeats):
        # Interleaved, order rotated per repeat: machine noise hits all six alike.
        order = list(range(len(calls)))
        order = order[r % len(order):] + order[: r % len(order)]
        for i in order:
            samples[i].append(time_calls(calls[i], counts[i]))
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


def measure_framework(framework: str, spec: GemmSpec, say: Callable[[str], None] | None = None,
                      precision: str = "fp32") -> dict[str, Any]:
    """Time every variant and its twin at each (hidden, batch) point for one framework.

    Returns:
        ``{"framework", "device", "precision", "clock", "peak": {...}, "rows": [...]}``; one row
        per (hidden, batch, variant) with median seconds, GFLOP/s, fraction of peak and the
        twin's figures.
    """
    used = resolve_clock(spec.clock, spec.threads, spec.device)
    use_clock(used)
    make = device_backend(framework, spec.device, spec.threads, precision)

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


def run_gemm(frameworks: list[str], spec: GemmSpec,
             say: Callable[[str], None] | None = None) -> GemmRecord:
    """Measure every framework and return the gemm record, with the findings.

    Raises:
        HvdscaleError: bad sizes or counts, or a framework that is not installed.
    """
    for name, val, low in (("--threads", spec.threads, 1), ("--gates", spec.gates, 1),
                           ("--repeats", spec.repeats, 1), ("--warmup", spec.warmup, 0),
                           ("--peak-size", spec.peak_size, 1)):
        if not isinstance(val, int) or val < low:
            raise HvdscaleError(f"{name} must be an integer >= {low} (got {val!r})")
    used = resolve_clock(spec.clock, spec.threads, spec.device)
    set_thread_env(spec.threads)
    for fw in frameworks:  # every framework installed before the first is measured
        check_installed(fw)
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
    return GemmRecord(
        status="ok", started=started, finished=datetime.now(UTC).isoformat(timespec="seconds"),
        host=socket.gethostname(), threads=spec.threads, clock=used, device=spec.device,
        precisions=list(spec.precisions), gates=spec.gates, repeats=spec.repeats,
        warmup=spec.warmup, min_time_s=spec.min_time_s, hidden=list(spec.hidden),
        batch=list(spec.batch),
        loadavg=LoadPair(before=list(load_before), after=list(os.getloadavg())),
        versions=versions(), git=git_revision(), frameworks=results)
