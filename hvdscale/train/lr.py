"""``optim.scale_lr``: the optimizer settings a run uses for its number of workers.

Under weak scaling the global batch grows k = workers times, and each rule answers "what
should the optimizer do with a k times larger batch" as its source states it:

* ``none``: nothing (the baseline: hold every setting).
* ``linear``: lr x k. Goyal et al. 2017, "Accurate, Large Minibatch SGD: Training ImageNet in
  1 Hour", stated for SGD with momentum and paired there with a gradual warm-up from the
  1-worker rate (here ``optim.warmup_steps``, a separate choice so both are measurable).
* ``sqrt``: lr x sqrt(k), the rule that keeps the update's noise scale for adaptive
  optimizers (Adam); Malladi et al. 2022, "On the SDEs and Scaling Rules for Adaptive Gradient
  Algorithms", derive it from Adam's stochastic differential equation.
* ``sqrt_adam``: Malladi et al.'s whole rule, not the rate alone: lr x sqrt(k), and
  1 - beta1, 1 - beta2 each x k (the averages forget k times faster, since each update stands
  for k times more samples) and eps / sqrt(k). Adam only.
* ``legw``: You et al. 2019, "Large-Batch Training for LSTM and Beyond" (Linear-Epoch
  Gradual Warm-up, shown on LSTMs): lr x sqrt(k) with a warm-up whose length in updates grows
  k times, so it spans the same number of epochs; ``optim.warmup_steps`` is its length at one
  worker.

Strong scaling keeps the global batch, so it keeps every setting whatever the rule.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from hvdscale.config import OptimConfig
from hvdscale.errors import ConfigError

_RATE = {"none": lambda k: 1.0, "linear": float, "sqrt": math.sqrt, "legw": math.sqrt,
         "sqrt_adam": math.sqrt}
"""Each rule's learning-rate factor for a batch k times larger."""


def _adam_moved(cfg: OptimConfig, k: float) -> dict[str, Any]:
    """``sqrt_adam``'s betas and eps for a k times larger batch; a beta the rule would push to
    zero or below is refused, since Adam then keeps no average at all."""
    betas = tuple(1.0 - k * (1.0 - b) for b in cfg.betas)
    if min(betas) <= 1e-6:  # (1e-6: 1 - 10 x 0.1 is 2e-16 in floating point, not 0)
        raise ConfigError(
            f"optim.scale_lr=sqrt_adam with {k:g} workers sets Adam's betas to "
            f"{[round(b, 6) for b in betas]}: 1 - beta x {k:g} reaches 0; raise optim.betas "
            f"(1 - beta below 1/{k:g}) or use scale_lr=sqrt")
    return {"betas": betas, "eps": cfg.eps / math.sqrt(k)}


def scaled_optim(cfg: OptimConfig, scaling: str,
                 workers: int) -> tuple[OptimConfig, dict[str, Any]]:
    """The optimizer section with the rule's settings, and what the record says about it.

    The warm-up (``optim.warmup_steps``) starts from ``lr`` as configured unless
    ``warmup_start_lr`` says otherwise, so the section handed to the optimizers carries that
    start rate.
    """
    k = float(workers) if scaling == "weak" else 1.0
    factor = _RATE[cfg.scale_lr](k)
    changes: dict[str, Any] = {}
    if cfg.scale_lr == "sqrt_adam" and k != 1.0:
        changes = _adam_moved(cfg, k)
    warmup = cfg.warmup_steps
    if cfg.scale_lr == "legw":
        warmup = round(cfg.warmup_steps * k)
    start = cfg.lr if cfg.warmup_start_lr is None else cfg.warmup_start_lr
    used = dataclasses.replace(cfg, lr=cfg.lr * factor, warmup_start_lr=start,
                               warmup_steps=warmup, **changes)
    return used, {"scale_lr": cfg.scale_lr, "lr": cfg.lr, "factor": factor, "lr_used": used.lr,
                  "workers": workers, "warmup_steps": warmup,
                  "warmup_steps_configured": cfg.warmup_steps, "warmup_start_lr": start,
                  "betas_used": list(used.betas), "eps_used": used.eps}
