"""``optim.warmup_steps`` for torch optimizers: each group's rate set before each update.

The ramp's settings and the group's update count live in the param group dicts, not in the
optimizer object: Horovod's ``DistributedOptimizer`` builds a new optimizer (a subclass of
this one's class) over the same group dicts, and its ``step`` ends in this class's ``step``,
so the wrapped and the plain optimizer share one count. Without a warm-up the optimizer is
the plain torch class, untouched.
"""

from __future__ import annotations

from typing import Any

import torch

from hvdscale.config import OptimConfig
from hvdscale.core.lr_warmup import lr_at, warmup_of

_WARM_CLASSES: dict[type, type] = {}


class _WarmupStep:
    """Mixin: before each update, every group's ``lr`` becomes the ramp's rate for it."""

    param_groups: list[dict[str, Any]]

    def step(self, closure: Any = None) -> Any:
        for group in self.param_groups:
            group["lr"] = lr_at(group["warmup_done"], group["warmup_base"],
                                group["warmup_peak"], group["warmup_steps"])
            group["warmup_done"] += 1
        return super().step(closure)  # type: ignore[misc]


def _warm_class(base: type) -> type:
    if base not in _WARM_CLASSES:
        _WARM_CLASSES[base] = type(f"Warmup{base.__name__}", (_WarmupStep, base), {})
    return _WARM_CLASSES[base]


def warmup_optimizer(opt: torch.optim.Optimizer, cfg: OptimConfig) -> torch.optim.Optimizer:
    """``opt`` itself without a warm-up; else a fresh optimizer of a subclass of its class over
    its param groups (hyper-parameters kept; ``opt`` must not have stepped yet)."""
    ramp = warmup_of(cfg)
    if ramp is None:
        return opt
    base, peak, steps = ramp
    for group in opt.param_groups:
        group.update(warmup_base=base, warmup_peak=peak, warmup_steps=steps, warmup_done=0,
                     lr=base)
    return _warm_class(type(opt))(opt.param_groups)
