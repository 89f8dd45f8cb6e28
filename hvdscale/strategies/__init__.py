"""Gradient-sharing strategies behind one interface (``base.Strategy``); which exist and what
each is: ``hvdscale.registry``; how a built-in is built: ``builtin``.

Nothing is imported here: a strategy's code (numpy, MPI, a framework) is imported only when a
run builds it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hvdscale.config import HorovodConfig, StrategyConfig
    from hvdscale.strategies.base import Strategy

NativeFactory = Callable[["StrategyConfig", object], "Strategy"]
"""A framework package's ``make_native_strategy`` hook."""


def make_strategy(cfg: StrategyConfig, world: object,
                  horovod: Callable[[HorovodConfig], Strategy] | None,
                  native: NativeFactory | None = None) -> Strategy:
    """The strategy ``cfg.name``, built as its registry entry says; each reads only its own
    config section.

    Horovod plugs into each framework's own integration, so the framework in use passes its
    Horovod strategy class (its package's ``HorovodStrategy`` hook) as ``horovod``, and its own
    data-parallel strategy (``ddp``, ``mwms``: its ``make_native_strategy`` hook) as ``native``.
    """
    from hvdscale.registry import Hooks, get
    from hvdscale.strategies.builtin import BUILDERS

    spec = get(cfg.name)
    build = spec.build or BUILDERS[spec.name]  # a plugin brings its own; a built-in's is here
    return build(cfg, world, Hooks(horovod, native))


__all__ = ["make_strategy"]
