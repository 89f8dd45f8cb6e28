"""``optim.scale_lr``: the learning rate a run uses for its number of workers."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from hvdscale.config import OptimConfig


def scaled_optim(cfg: OptimConfig, scaling: str,
                 workers: int) -> tuple[OptimConfig, dict[str, Any]]:
    """The optimizer section with the rule's rate, and what the record says about it.

    Weak scaling grows the global batch with the workers, so ``linear`` multiplies ``lr`` by
    the workers and ``sqrt`` by their square root; strong scaling's global batch is fixed, so
    its rate stays ``lr``. The warm-up (``optim.warmup_steps``) starts from ``lr`` as
    configured unless ``warmup_start_lr`` says otherwise, so the section handed to the
    optimizers carries that start rate.
    """
    factor = 1.0
    if scaling == "weak" and cfg.scale_lr == "linear":
        factor = float(workers)
    elif scaling == "weak" and cfg.scale_lr == "sqrt":
        factor = math.sqrt(workers)
    start = cfg.lr if cfg.warmup_start_lr is None else cfg.warmup_start_lr
    used = dataclasses.replace(cfg, lr=cfg.lr * factor, warmup_start_lr=start)
    return used, {"scale_lr": cfg.scale_lr, "lr": cfg.lr, "factor": factor, "lr_used": used.lr,
                  "workers": workers, "warmup_steps": cfg.warmup_steps,
                  "warmup_start_lr": start}
