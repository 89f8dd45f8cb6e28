"""``optim.warmup_steps``: the learning rate of each optimizer update during the warm-up.

Goyal et al.'s gradual warm-up: the rate ramps linearly from a start rate (the configured
``optim.lr`` before ``optim.scale_lr`` multiplied it) to the rate in force, over the first
``warmup_steps`` updates, then stays there. It is a pure function of the update count, so
every optimizer (PyTorch's, the TensorFlow adapter's, the parameter server's shards) computes
it from its own counter and no rank needs to tell another which update it is at.
"""

from __future__ import annotations

from hvdscale.config import OptimConfig


def lr_at(t: int, base: float, peak: float, warmup_steps: int) -> float:
    """The rate of update ``t`` (0 is the first): ``base`` at 0, rising linearly, ``peak``
    from update ``warmup_steps`` on (and always when there is no warm-up)."""
    if warmup_steps <= 0 or t >= warmup_steps or base == peak:
        return peak
    return base + (peak - base) * t / warmup_steps


def warmup_of(cfg: OptimConfig) -> tuple[float, float, int] | None:
    """(start rate, peak rate, steps) of ``cfg``'s warm-up; None when the rate is ``cfg.lr``
    from the first update (no steps, or the start rate is the rate in force)."""
    base = cfg.lr if cfg.warmup_start_lr is None else cfg.warmup_start_lr
    if cfg.warmup_steps == 0 or base == cfg.lr:
        return None
    return base, cfg.lr, cfg.warmup_steps


def rate_at(cfg: OptimConfig, t: int) -> float:
    """The rate of ``cfg``'s update ``t`` (0 is the first): exactly ``cfg.lr`` without warm-up."""
    ramp = warmup_of(cfg)
    return cfg.lr if ramp is None else lr_at(t, *ramp)


def warmup_rates(cfg: OptimConfig) -> list[float]:
    """The rates of updates 0 .. ``warmup_steps`` (the last one holds from then on): a table a
    traced graph indexes by its update counter, so it applies the very values ``rate_at``
    gives."""
    return [rate_at(cfg, t) for t in range(cfg.warmup_steps + 1)]
