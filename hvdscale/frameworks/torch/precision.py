"""``precision`` for PyTorch: autocast around the forward pass and fp16's dynamic loss scaler.

Parameters, gradients and the optimizer stay fp32 in every precision (master weights): autocast
computes the forward's matmuls in bf16 or fp16 and autograd returns fp32 gradients for the fp32
parameters, so every strategy gets the gradients in the dtype the optimizer steps in.

fp16's loss scale multiplies the backward's seed (the strategy's token scale), so the gradients
the strategies reduce carry it; it is taken out after the reduction, just before the update, in
the optimizer's own ``step`` (a subclass of the optimizer's class, like ``warmup``'s, so Horovod's
``DistributedOptimizer`` built over the same param groups runs it after its synchronisation).
Every rank then decides on the same reduced gradient whether it overflowed, so all skip the same
steps and the replicas stay identical. The scale and its counters live in the param-group dicts
that Horovod's wrapper shares.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}
"""The precisions that autocast, and their compute dtype."""
INITIAL_SCALE = 2.0**16
"""fp16's first loss scale (torch.amp.GradScaler's default)."""
GROWTH_INTERVAL = 2000
"""Good steps after which the scale doubles (GradScaler's default)."""


def cpu_lstm_refusal(precision: str) -> str | None:
    """Why this CPU cannot run ``nn.LSTM`` (the fused RNN) under ``precision``'s autocast, or
    None when it can (fp32 and tf32 always can).

    PyTorch hands a bf16 or fp16 LSTM on the CPU to oneDNN whenever the CPU has AVX-512, and
    oneDNN has no reduced-precision LSTM kernel below its own ISA level (an AVX2 cap, some older
    or virtual CPUs), so the run would end in a traceback at the first step; a two-step LSTM of
    width 4, forward and backward, says so first (a millisecond).
    """
    dtype = AUTOCAST.get(precision)
    if dtype is None:
        return None
    lstm = torch.nn.LSTM(4, 4)
    try:
        with torch.autocast("cpu", dtype=dtype):
            out, _ = lstm(torch.zeros(2, 1, 4))
        out.float().sum().backward()
    except RuntimeError as e:
        first = str(e).split(". ")[0] or type(e).__name__  # oneDNN's advice follows
        return (f"{precision} with model.rnn_impl=fused on this CPU: PyTorch's oneDNN LSTM "
                f"refuses it ({first}); use precision=fp32, or model.rnn_impl=loop")
    return None


def autocast(precision: str, device_type: str) -> contextlib.AbstractContextManager:
    """The forward pass's autocast context for ``precision`` (a no-op for fp32 and tf32)."""
    dtype = AUTOCAST.get(precision)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type, dtype=dtype)


class _LossScaleStep:
    """Mixin: unscale the (reduced) gradients, skip the update if any is not finite."""

    param_groups: list[dict[str, Any]]

    def step(self, closure: Any = None) -> Any:
        head = self.param_groups[0]
        inv = 1.0 / head["loss_scale"]
        finite = True
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad.to_dense() if p.grad.is_sparse else p.grad
                finite = finite and bool(torch.isfinite(g).all())
                p.grad.mul_(inv)  # a power of two: exact, so fp32 exactness is kept
        if not finite:  # every rank sees the same reduced gradient, so all skip alike
            head["loss_scale"] /= 2.0
            head["loss_scale_good"] = 0
            head["loss_scale_skipped"] += 1
            return None
        head["loss_scale_good"] += 1
        if head["loss_scale_good"] >= GROWTH_INTERVAL:
            head["loss_scale"] *= 2.0
            head["loss_scale_good"] = 0
        return super().step(closure)  # type: ignore[misc]


_SCALED: dict[type, type] = {}


def loss_scaled(opt: torch.optim.Optimizer, precision: str) -> torch.optim.Optimizer:
    """``opt`` itself unless ``precision`` is fp16; else the same optimizer made of a subclass
    of its class with the loss-scale step (``opt`` must not have stepped yet)."""
    if precision != "fp16":
        return opt
    base = type(opt)
    if base not in _SCALED:
        _SCALED[base] = type(f"LossScaled{base.__name__}", (_LossScaleStep, base), {})
    opt.param_groups[0].update(loss_scale=INITIAL_SCALE, loss_scale_good=0,
                               loss_scale_skipped=0)
    return _SCALED[base](opt.param_groups)


def loss_scale(opt: torch.optim.Optimizer) -> float:
    """The loss scale the next backward multiplies by (1 without fp16)."""
    return float(opt.param_groups[0].get("loss_scale", 1.0))


def scaler_state(opt: torch.optim.Optimizer) -> dict[str, Any] | None:
    """fp16's scaler at the end of a run (None without one): scale and skipped steps."""
    head = opt.param_groups[0]
    if "loss_scale" not in head:
        return None
    return {"loss_scale": head["loss_scale"], "skipped_steps": head["loss_scale_skipped"],
            "initial_scale": INITIAL_SCALE, "growth_interval": GROWTH_INTERVAL}
