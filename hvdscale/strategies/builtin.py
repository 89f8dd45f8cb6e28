"""The built-in strategies, one ``register`` call each (``hvdscale.strategies.registry``).

Each builder imports its strategy's code when a run builds it, so reading the table (config
validation, the report) imports no framework, no MPI and no Horovod.
"""

from __future__ import annotations

from typing import Any

from hvdscale.errors import HvdscaleError
from hvdscale.strategies.registry import Hooks, StrategySpec, register


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


register(StrategySpec(
    "horovod", "Horovod's allreduce", _horovod, order=1, overlaps=True))
register(StrategySpec(
    "independent", "independent replicas (no communication: the ideal case)", _independent,
    sends=False, order=0, families=("none", "straggler", "contention")))
register(StrategySpec(
    "ps", "the MPI parameter server", _ps, order=3,
    mpi="its workers and servers exchange gradients and parameters by MPI point-to-point",
    families=("ps", "shared-link", "sync", "shared-link+straggler"),
    precisions=("fp32", "tf32", "bf16"),
    refuses="each server updates its own shard, so a step skipped for an overflow could not "
            "be agreed (use bf16)"))
register(StrategySpec(
    "ddp", "PyTorch's DistributedDataParallel", _native, frameworks=("torch",), native=True,
    mpi="under horovodrun --gloo there is no MPI to agree torch.distributed's "
        "MASTER_ADDR/MASTER_PORT over",
    order=2, overlaps=True))  # ring allreduce over buckets, overlapped with backward
register(StrategySpec(
    "mwms", "TensorFlow's MultiWorkerMirroredStrategy", _native, frameworks=("tf",),
    native=True, mpi="under horovodrun --gloo there is no MPI to agree TF_CONFIG over",
    order=2, overlaps=True,  # a ring of collective ops
    # TensorFlow's collective runtime cannot be configured again in one process.
    alone="TensorFlow's MultiWorkerMirroredStrategy is set up once per process"))
