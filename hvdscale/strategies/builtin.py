"""How each built-in strategy is built (their traits: ``hvdscale.registry.BUILTIN``).

Each builder imports its strategy's code when a run builds it, so reading the table (config
validation, the report) imports no framework, no MPI and no Horovod.
"""

from __future__ import annotations

from typing import Any

from hvdscale.errors import HvdscaleError
from hvdscale.registry import Builder, Hooks


def _horovod(cfg: Any, world: Any, hooks: Hooks) -> Any:
    """Horovod plugs into each framework's own integration: the framework lends its class."""
    if hooks.horovod is None:
        raise HvdscaleError("strategy 'horovod' needs the framework's Horovod strategy class")
    return hooks.horovod(cfg.horovod)


def _independent(cfg: Any, world: Any, hooks: Hooks) -> Any:
    from hvdscale.strategies.independent import Independent

    return Independent()


def _ps(cfg: Any, world: Any, hooks: Hooks) -> Any:
    from hvdscale.strategies.param_server import ParameterServer

    return ParameterServer(cfg.ps, world)


def _native(cfg: Any, world: Any, hooks: Hooks) -> Any:
    """The framework's own data parallelism (``ddp``, ``mwms``): its package builds it."""
    if hooks.native is None:
        raise HvdscaleError(f"strategy {cfg.name!r} needs the framework's native strategy")
    return hooks.native(cfg, world)


BUILDERS: dict[str, Builder] = {"horovod": _horovod, "independent": _independent, "ps": _ps,
                                "ddp": _native, "mwms": _native}
"""Each built-in strategy's builder, by name."""
