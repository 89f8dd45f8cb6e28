"""Reading the timeline Horovod 0.28.1 writes: per captured step, time per phase and fusion.

Written by the coordinator (rank 0) only. Nothing here imports Horovod or a framework.

Timeline (chrome://tracing JSON, ``horovod/common/timeline.cc``): every tensor is a "process"
(``pid``) named by a ``process_name`` metadata event; per tensor, ``B``/``E`` pairs nest as
``NEGOTIATE_ALLREDUCE`` (from the first rank's request to the last one's, with an ``X`` event
per rank as it became ready), then the top-level ``ALLREDUCE`` holding the activities
``WAIT_FOR_DATA`` (GPU only), ``MEMCPY_IN_FUSION_BUFFER``, ``MPI_ALLREDUCE`` or
``GLOO_ALLREDUCE``, ``MEMCPY_OUT_FUSION_BUFFER``. The top-level ``E`` carries the tensor's dtype
and shape. Tensors fused into one buffer share one activity interval: the background thread
starts the activity for all of them before it ends it for any, and runs one response at a time.
``CYCLE_START`` instant events mark the background thread's cycles (with mark_cycles).

Horovod's other file about itself, its autotuner's log, is read by
``hvdscale.records.autotune_log``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from hvdscale.errors import HvdscaleError

ALLREDUCE_ACTIVITIES = ("MPI_ALLREDUCE", "GLOO_ALLREDUCE", "NCCL_ALLREDUCE", "CCL_ALLREDUCE")
PHASES = ("NEGOTIATE_ALLREDUCE", "WAIT_FOR_DATA", "MEMCPY_IN_FUSION_BUFFER", "ALLREDUCE_OP",
          "MEMCPY_OUT_FUSION_BUFFER")
"""Per-step phases summarised (``ALLREDUCE_OP`` is whichever ``*_ALLREDUCE`` activity ran)."""
DTYPE_BYTES = {"uint8": 1, "int8": 1, "uint16": 2, "int16": 2, "int32": 4, "int64": 8,
               "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "bool": 1}
HARNESS_TENSORS = ("hvdscale.tokens", "hvdscale.world", "hvdscale.optstate")
"""Our own small allreduces (token count, harness collectives): not gradients."""


class TimelineError(HvdscaleError):
    """A timeline or autotune log that cannot be read; the message names the file."""


def load_timeline(path: str | Path) -> list[dict[str, Any]]:
    """The events of a Horovod timeline file.

    Raises:
        TimelineError: missing, empty, not JSON, or not a list of trace events.
    """
    p = Path(path)
    if not p.is_file():
        raise TimelineError(f"Horovod timeline {p} does not exist (was the timeline on, and did "
                            "the run reach a measured step?)")
    text = p.read_text(errors="replace").strip()
    if not text:
        raise TimelineError(f"Horovod timeline {p} is empty (Horovod recorded no event)")
    try:
        events = json.loads(text)
    except json.JSONDecodeError as e:
        raise TimelineError(f"Horovod timeline {p} is malformed: not valid JSON ({e.msg} at "
                            f"line {e.lineno}, column {e.colno})") from None
    if not isinstance(events, list) or not all(isinstance(e, dict) and "ph" in e
                                               for e in events):
        raise TimelineError(f"Horovod timeline {p} is malformed: expected a JSON list of trace "
                            "events, each with a 'ph' field")
    return events


class _Interval:
    __slots__ = ("args", "end", "name", "start", "tensor")

    def __init__(self, tensor: str, name: str, start: float) -> None:
        self.tensor, self.name, self.start = tensor, name, start
        self.end = math.nan
        self.args: dict[str, Any] = {}


def _intervals(events: list[dict[str, Any]], path: Path) -> tuple[list[_Interval], float,
                                                                 list[float], dict[str, list]]:
    """Pair B/E events per tensor into intervals (ts in us since the timeline's start)."""
    names: dict[int, str] = {}
    epoch_us = math.nan
    cycles: list[float] = []
    ready: dict[str, list] = {}
    open_: dict[int, list[_Interval]] = {}
    out: list[_Interval] = []
    try:
        for ev in events:
            ph = ev["ph"]
            if ph == "M":
                args = ev.get("args", {})
                if ev.get("name") == "process_name":
                    if "name" in args:
                        names[int(ev["pid"])] = str(args["name"])
                    if "start_time_since_epoch_in_micros" in args:
                        epoch_us = float(args["start_time_since_epoch_in_micros"])
                continue
            if ph == "i":
                if ev.get("name") == "CYCLE_START":
                    cycles.append(float(ev["ts"]))
                continue
            pid = int(ev["pid"])
            ts = float(ev["ts"])
            tensor = names.get(pid, f"pid{pid}")
            if ph == "B":
                iv = _Interval(tensor, str(ev["name"]), ts)
                open_.setdefault(pid, []).append(iv)
                out.append(iv)
            elif ph == "E":
                stack = open_.get(pid)
                if stack is None:
                    continue  # began before the capture opened the file
                if not stack:
                    raise TimelineError(f"Horovod timeline {path} is malformed: an end event "
                                        f"at ts={ts:g} for {tensor!r} has no matching begin")
                iv = stack.pop()
                iv.end = ts
                iv.args = ev.get("args", {}) or {}
            elif ph == "X":  # a rank became ready during negotiation (name = rank)
                ready.setdefault(tensor, []).append((ts, str(ev.get("name"))))
    except (KeyError, TypeError, ValueError) as e:
        raise TimelineError(f"Horovod timeline {path} is malformed: bad event field ({e!r})"
                            ) from None
    # Intervals left open: the capture was closed while they ran; they are dropped.
    return [iv for iv in out if not math.isnan(iv.end)], epoch_us, cycles, ready


def _tensor_bytes(args: dict[str, Any]) -> int | None:
    shape, dtype = args.get("shape"), args.get("dtype")
    if not isinstance(shape, str) or dtype not in DTYPE_BYTES:
        return None
    dims = [d.strip() for d in shape.strip("[]").split(",") if d.strip()]
    try:
        return int(np.prod([int(d) for d in dims], dtype=np.int64)) * DTYPE_BYTES[dtype]
    except ValueError:
        return None


def _union_ms(spans: list[tuple[float, float]], lo: float = -math.inf,
              hi: float = math.inf) -> float:
    """Length (ms) of the union of ``spans`` (us) clipped to [lo, hi]."""
    clipped = sorted((max(a, lo), min(b, hi)) for a, b in spans if min(b, hi) > max(a, lo))
    total, cur_a, cur_b = 0.0, None, None
    for a, b in clipped:
        if cur_b is None or a > cur_b:
            if cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_b is not None:
        total += cur_b - cur_a
    return total / 1e3


def _is_gradient(tensor: str) -> bool:
    # Horovod's TensorFlow ops may spell the dots of a name as underscores.
    t = tensor.replace("_", ".")
    return not any(h in t for h in HARNESS_TENSORS)


def fused_buffers(intervals: list[_Interval], sizes: dict[str, int]) -> list[dict[str, Any]]:
    """One entry per allreduce Horovod executed: its tensors, bytes and time span (us).

    Tensors of one fused response share an activity: all of them start before any ends, and
    the next response starts after this one ended.
    """
    acts = sorted((iv for iv in intervals if iv.name in ALLREDUCE_ACTIVITIES),
                  key=lambda iv: iv.start)
    groups: list[list[_Interval]] = []
    for iv in acts:
        if groups and iv.start < min(g.end for g in groups[-1]):
            groups[-1].append(iv)
        else:
            groups.append([iv])
    return [{"tensors": [g.tensor for g in grp],
             "bytes": sum(sizes.get(g.tensor, 0) for g in grp),
             "start": min(g.start for g in grp), "end": max(g.end for g in grp),
             "op": grp[0].name}
            for grp in groups]


_Window = tuple[float, float, float, float]
"""One captured step in us since the timeline's start: start, backward start, backward end, end
(the backward pair NaN when unknown, the end inf for the last step without marks)."""


def _tensor_sizes(intervals: list[_Interval]) -> dict[str, int]:
    """Bytes of each tensor, from the dtype and shape its top-level end event carries."""
    sizes: dict[str, int] = {}
    for iv in intervals:
        if iv.name == "ALLREDUCE" or iv.args.get("shape"):
            b = _tensor_bytes(iv.args)
            if b is not None:
                sizes[iv.tensor] = b
    return sizes


def _step_windows(intervals: list[_Interval], marks: list[dict[str, float]] | None,
                  epoch_us: float, path: Path) -> list[_Window]:
    """The captured steps: from the marks, else one per token-count allreduce (to the next)."""
    if marks:
        if math.isnan(epoch_us):
            raise TimelineError(f"Horovod timeline {path} is malformed: no "
                                "start_time_since_epoch_in_micros to line steps up with")
        return [tuple((m[k] * 1e6 - epoch_us) for k in  # type: ignore[misc]
                      ("start", "backward_start", "backward_end", "end")) for m in marks]
    starts = sorted(iv.start for iv in intervals
                    if iv.name == "NEGOTIATE_ALLREDUCE"
                    and "hvdscale.tokens" in iv.tensor.replace("_", "."))
    ends = [*starts[1:], math.inf]
    return [(a, math.nan, math.nan, b) for a, b in zip(starts, ends, strict=True)]


def _step_summary(window: _Window, grad: list[_Interval],
                  buffers: list[dict[str, Any]]) -> dict[str, Any]:
    """One step: time per phase, the fused buffers that started in it, overlap with backward."""
    w0, b0, b1, w1 = window
    in_step = [iv for iv in grad if w0 <= iv.start < w1]
    per: dict[str, float] = {}
    for phase in PHASES:
        names = ALLREDUCE_ACTIVITIES if phase == "ALLREDUCE_OP" else (phase,)
        per[phase] = _union_ms([(iv.start, iv.end) for iv in in_step if iv.name in names])
    bufs = [b for b in buffers if w0 <= b["start"] < w1]
    ar = [(b["start"], b["end"]) for b in bufs]
    step = {"step_ms": (w1 - w0) / 1e3 if math.isfinite(w1) else None,
            "phases_ms": per,
            "fused_buffers": len(bufs),
            "buffer_bytes": [b["bytes"] for b in bufs],
            "tensors_per_buffer": [len(b["tensors"]) for b in bufs],
            "allreduce_ms": _union_ms(ar)}
    if math.isfinite(b0) and math.isfinite(b1):
        step["backward_ms"] = (b1 - b0) / 1e3
        step["allreduce_during_backward_ms"] = _union_ms(ar, b0, b1)
        step["allreduce_after_backward_ms"] = _union_ms(ar, b1, w1)
        # From the end of backward to the end of the last allreduce of the step: what the
        # step waited for communication (negotiation, copies, the reduction itself).
        last = max((b["end"] for b in bufs), default=b1)
        step["wait_after_backward_ms"] = max(0.0, (last - b1) / 1e3)
    return step


def _step_medians(steps: list[dict[str, Any]]) -> dict[str, float | None]:
    """The median over the steps of each per-step figure (None where no step has it)."""
    def med(key: str) -> float | None:
        vals = [s[key] for s in steps if s.get(key) is not None]
        return float(np.median(vals)) if vals else None

    return {"fused_buffers": med("fused_buffers"), "allreduce_ms": med("allreduce_ms"),
            "backward_ms": med("backward_ms"),
            "allreduce_during_backward_ms": med("allreduce_during_backward_ms"),
            "wait_after_backward_ms": med("wait_after_backward_ms"),
            "step_ms": med("step_ms"),
            **{f"{ph}_ms": (float(np.median([s["phases_ms"][ph] for s in steps]))
                            if steps else None) for ph in PHASES}}


def _buffer_stats(buffers: list[dict[str, Any]]) -> dict[str, Any]:
    """Count and sizes of the fused buffers of the whole capture."""
    all_sizes = [b["bytes"] for b in buffers]
    return {"count": len(buffers), "max_bytes": max(all_sizes, default=0),
            "min_bytes": min(all_sizes, default=0),
            "median_bytes": float(np.median(all_sizes)) if all_sizes else 0.0,
            "max_tensors": max((len(b["tensors"]) for b in buffers), default=0)}


def summarize_timeline(path: str | Path, marks: list[dict[str, float]] | None = None
                       ) -> dict[str, Any]:
    """Per-step summary of a Horovod timeline: time per phase, fused buffers, overlap.

    Args:
        path: the timeline file.
        marks: per captured step, wall-clock seconds ``start``, ``backward_start``,
            ``backward_end``, ``end`` (as ``time.time()``); without them each gradient
            allreduce counts toward one step per occurrence of the token-count allreduce.

    Returns:
        ``steps`` (one dict per step), their ``median`` and totals, the fusion buffers seen
        (count and sizes), the cycle spacing and which allreduce op ran.

    Raises:
        TimelineError: the file is missing or malformed (the message names it).
    """
    p = Path(path)
    events = load_timeline(p)
    intervals, epoch_us, cycles, ready = _intervals(events, p)
    buffers = [b for b in fused_buffers(intervals, _tensor_sizes(intervals))
               if any(_is_gradient(t) for t in b["tensors"])]
    windows = _step_windows(intervals, marks, epoch_us, p)
    grad = [iv for iv in intervals if _is_gradient(iv.tensor)]
    steps = [_step_summary(w, grad, buffers) for w in windows]
    gaps = np.diff(sorted(cycles)) / 1e3 if len(cycles) > 1 else np.array([])
    return {
        "file": str(p),
        "steps": steps,
        "median": _step_medians(steps),
        "buffers": _buffer_stats(buffers),
        "gradient_tensors": len({iv.tensor for iv in grad if iv.name == "ALLREDUCE"}),
        "allreduce_ops": sorted({b["op"] for b in buffers}),
        "cycles": {"count": len(cycles),
                   "median_gap_ms": float(np.median(gaps)) if gaps.size else None},
        "ranks_seen_ready": sorted({r for v in ready.values() for _, r in v}),
        "wait_for_data_note": "WAIT_FOR_DATA is emitted only for GPU tensors (ready events); "
                              "on CPU it is 0 by construction",
    }
