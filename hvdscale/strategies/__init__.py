"""Gradient-sharing strategies behind one interface (``base.Strategy``)."""

from __future__ import annotations

from collections.abc import Callable

from hvdscale.config import HorovodConfig, StrategyConfig
from hvdscale.strategies.base import Strategy


def make_strategy(cfg: StrategyConfig, world: object,
                  horovod: Callable[[HorovodConfig], Strategy]) -> Strategy:
    """The strategy ``cfg.name``; each reads only its own config section.

    ``ps`` and ``independent`` are written once against the adapter protocol; Horovod plugs
    into each framework's own integration, so the framework in use passes its Horovod strategy
    class (its package's ``HorovodStrategy`` hook) as ``horovod``.
    """
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
