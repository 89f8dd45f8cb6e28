"""PyTorch's side of ``hvdscale profile``: operators and kernels per step from torch's
profiler, split between the RNN, the softmax projection and the rest, and by phase.

PyTorch runs eagerly (no graph): ``ops`` are the operators the program called (outermost
``aten::`` events, forward and backward) and ``kernels`` the innermost operator events
(operators that call no other operator: what actually ran). These stand in for the seed notes'
"operators in the graph" and "kernel invocations", which were measured on TensorFlow.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from hvdscale.frameworks.profiling import CATEGORIES, PHASES
from hvdscale.models.torch.lstm import LoopLSTM

# Loss ops called outside the projection module: part of the softmax projection's cost.
_SOFTMAX_OPS = ("aten::cross_entropy_loss", "aten::log_softmax", "aten::_log_softmax",
                "aten::nll_loss", "aten::nll_loss_nd", "aten::nll_loss2d")


def _label_modules(model: Any) -> list[Any]:
    """Wrap the RNN stacks and the softmax projection in profiler ranges (forward pass)."""
    handles = []
    for name, mod in model.named_children():
        if isinstance(mod, nn.RNNBase | LoopLSTM):
            label = "hvdscale/rnn"
        elif name == "proj":
            label = "hvdscale/softmax"
        else:
            continue
        ranges: list[Any] = []

        def pre(_m: Any, _in: Any, label: str = label, ranges: list = ranges) -> None:
            r = torch.autograd.profiler.record_function(label)
            r.__enter__()
            ranges.append(r)

        def post(_m: Any, _in: Any, _out: Any, ranges: list = ranges) -> None:
            ranges.pop().__exit__(None, None, None)

        handles += [mod.register_forward_pre_hook(pre), mod.register_forward_hook(post)]
    return handles


def _is_op(ev: Any) -> bool:
    # Operators carry a namespace (aten::mm); profiler ranges (ours, the optimizer's) and the
    # autograd engine's wrappers (autograd::engine::evaluate_function: ...) do not count.
    return "::" in ev.name and not ev.name.startswith("autograd::")


def _ancestors(ev: Any) -> list[Any]:
    out = []
    p = ev.cpu_parent
    while p is not None:
        out.append(p)
        p = p.cpu_parent
    return out


def _descendants(ev: Any) -> list[Any]:
    out, todo = [], list(ev.cpu_children)
    while todo:
        e = todo.pop()
        out.append(e)
        todo.extend(e.cpu_children)
    return out


def _forward_parts(events: list[Any]) -> dict[int, str]:
    """The part (``rnn``, ``softmax``) of each forward operator that records an autograd node,
    by its sequence number: what its backward operators are attributed to."""
    seq_cat: dict[int, str] = {}
    for e in events:
        if e.name in ("hvdscale/rnn", "hvdscale/softmax"):
            cat = e.name.split("/")[1]
            for d in _descendants(e):
                if d.sequence_nr >= 0:
                    seq_cat[d.sequence_nr] = cat
        elif e.name in _SOFTMAX_OPS and not any(_is_op(a) for a in _ancestors(e)):
            for d in [e, *_descendants(e)]:
                if d.sequence_nr >= 0:
                    seq_cat[d.sequence_nr] = "softmax"
    return seq_cat


def _category(e: Any, seq_cat: dict[int, str]) -> str:
    """The part an operator event belongs to: the range around it in the forward pass, its
    forward operator's part in the backward (``seq_cat``), else softmax's loss ops or other."""
    for a in _ancestors(e):
        if a.name.startswith("hvdscale/"):
            return a.name.split("/")[1]
        if a.name.startswith("autograd::engine::evaluate_function"):
            return seq_cat.get(a.sequence_nr, "other")
    return "softmax" if e.name in _SOFTMAX_OPS else "other"


def _phase(e: Any) -> str:
    """``forward``, ``backward`` (run by the autograd engine) or ``update`` (the optimizer)."""
    for a in _ancestors(e):
        if a.name.startswith("autograd::engine::evaluate_function"):
            return "backward"
        if a.name.startswith("Optimizer."):
            return "update"
    return "forward"


def count_torch_events(events: list[Any], steps: int) -> dict[str, Any]:
    """Ops, kernels and the time split per step from a torch profiler's event list.

    Forward operators are attributed by the profiler range around them; a backward operator by
    the autograd node it runs for, whose sequence number is the one of the forward operator that
    recorded it.
    """
    outer = [e for e in events if _is_op(e) and not any(_is_op(a) for a in _ancestors(e))]
    seq_cat = _forward_parts(events)
    ops: Counter[str] = Counter()
    op_us: Counter[str] = Counter()
    for e in outer:
        c = _category(e, seq_cat)
        ops[c] += 1
        op_us[c] += e.time_range.elapsed_us()
    kernels = [e for e in events if _is_op(e) and not any(_is_op(c) for c in e.cpu_children)]
    kcat: Counter[str] = Counter(_category(e, seq_cat) for e in kernels)
    ophase: Counter[str] = Counter(_phase(e) for e in outer)
    kphase: Counter[str] = Counter(_phase(e) for e in kernels)
    return {
        "ops": len(outer) / steps, "kernels": len(kernels) / steps,
        "events": len(events) / steps,
        "ops_by_part": {c: ops[c] / steps for c in CATEGORIES},
        "kernels_by_part": {c: kcat[c] / steps for c in CATEGORIES},
        "ops_by_phase": {p: ophase[p] / steps for p in PHASES},
        "kernels_by_phase": {p: kphase[p] / steps for p in PHASES},
        "op_s_by_part": {c: op_us[c] / 1e6 / steps for c in CATEGORIES},
        "top_ops": Counter(e.name for e in outer).most_common(8),
    }


def profile_steps(adapter: Any, step: Callable[[Any], float], batches: list[Any],
                  step_s: float) -> dict[str, Any]:
    """Profile one ``step`` per batch with PyTorch's profiler (the caller warmed up and timed
    unprofiled steps: their median is ``step_s``)."""
    steps = len(batches)
    handles = _label_modules(adapter.model)
    cuda = getattr(getattr(adapter, "placement", None), "kind", "cpu") == "cuda"
    acts = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    try:
        with profile(activities=acts) as prof:
            t0 = time.perf_counter()
            for b in batches:
                step(b)
            if cuda:
                torch.cuda.synchronize()  # the kernels queued by the last step are counted
            wall = time.perf_counter() - t0
    finally:
        for h in handles:
            h.remove()
    events = list(prof.events())
    out = count_torch_events(events, steps)
    if cuda:
        out.update(gpu_kernel_counts(events, steps))
    out.update(step_s=step_s, profiled_step_s=wall / steps,
               counted_as={"ops": "outermost aten operators per step (forward + backward + "
                           "update)", "kernels": "innermost aten operators per step"},
               torch_threads=torch.get_num_threads())
    return out


def gpu_kernel_counts(events: list[Any], steps: int) -> dict[str, Any]:
    """Kernels the GPU ran per step (the seed notes' "kernel invocations": 1,281 cudnn_lstm vs
    37,644 dynamic_rnn), cuDNN's RNN kernels among them, and the most frequent names."""
    gpu = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA
           and not e.name.startswith(("Memcpy", "Memset"))]
    rnn = [e for e in gpu if "rnn" in e.name.lower() or "lstm" in e.name.lower()]
    return {"gpu_kernels": len(gpu) / steps, "gpu_rnn_kernels": len(rnn) / steps,
            "gpu_kernel_s": sum(e.time_range.elapsed_us() for e in gpu) / 1e6 / steps,
            "top_gpu_kernels": Counter(e.name[:80] for e in gpu).most_common(8)}
