"""Gradient-sharing strategies behind one interface (``base.Strategy``)."""

from __future__ import annotations

from collections.abc import Callable

from hvdscale.config import NATIVE_STRATEGIES, HorovodConfig, StrategyConfig
from hvdscale.strategies.base import Strategy

NativeFactory = Callable[[StrategyConfig, object], Strategy]
"""A framework package's ``make_native_strategy`` hook."""


def make_strategy(cfg: StrategyConfig, world: object,
                  horovod: Callable[[HorovodConfig], Strategy],
                  native: NativeFactory | None = None) -> Strategy:
    """The strategy ``cfg.name``; each reads only its own config section.

    ``ps`` and ``independent`` are written once against the adapter protocol; Horovod plugs
    into each framework's own integration, so the framework in use passes its Horovod strategy
    class (its package's ``HorovodStrategy`` hook) as ``horovod``, and its own data-parallel
    strategy (``ddp``, ``mwms``: its ``make_native_strategy`` hook) as ``native``.
    """
    if cfg.name in NATIVE_STRATEGIES:
        if native is None:
            raise ValueError(f"strategy {cfg.name!r} needs the framework's native strategy")
        return native(cfg, world)
    if cfg.name == "independent":
        from hvdscale.strategies.independent import Independent

        return Independent()
    if cfg.name == "horovod":
        return horovod(cfg.horovod)
    if cfg.name == "ps":
        from hvdscale.strategies.param_server import ParameterServer

        return ParameterServer(cfg.ps, world)
    raise ValueError(f"unknown strategy {cfg.name!r}")


__all__ = ["Strategy", "make_strategy"]
