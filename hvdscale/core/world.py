"""Who this process is among the ranks, and the few collectives the harness needs.

Two backends answer the same questions:

* ``MPIWorld`` over mpi4py's COMM_WORLD: launches by ``mpirun``, ``srun --mpi=pmix`` and
  ``horovodrun`` in MPI mode.
* ``HorovodWorld`` over Horovod's own collectives: ``horovodrun --gloo`` starts processes with no
  MPI job behind them (mpi4py would see N singletons), so Horovod is the only channel there.

Horovod is started once per process, through the integration of the framework in use
(``horovod.torch`` or ``horovod.tensorflow``): each integration loads its own copy of Horovod's
runtime, so touching the other one would start a second runtime (and import its framework).

The harness's collectives (barrier around the timed window, gathering timings, summing token
counts) are off the hot path; the strategies bring their own communication.
"""

from __future__ import annotations

import importlib
import os
import socket
from typing import Any

import numpy as np

RANK_ENV_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "HOROVOD_RANK")


def launch_rank() -> int:
    """This process's rank as the launcher's environment states it (0 when not launched)."""
    for var in RANK_ENV_VARS:
        if var in os.environ:
            try:
                return int(os.environ[var])
            except ValueError:
                continue
    return 0


def is_gloo_launch() -> bool:
    """True when ``horovodrun --gloo`` started this process (no MPI job exists)."""
    return "HOROVOD_GLOO_RENDEZVOUS_ADDR" in os.environ


class World:
    """Rank layout plus harness collectives; see ``MPIWorld`` and ``HorovodWorld``."""

    rank: int
    size: int
    local_rank: int
    local_size: int
    backend: str

    def barrier(self) -> None:
        raise NotImplementedError

    def allreduce_sum(self, values: np.ndarray) -> np.ndarray:
        """Elementwise sum of a float64 array over all ranks."""
        raise NotImplementedError

    def allgather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order (small picklable objects only)."""
        raise NotImplementedError

    def bcast(self, obj: Any, root: int = 0) -> Any:
        raise NotImplementedError

    @property
    def cross_size(self) -> int:
        """Number of hosts (derived from the local size; exact when hosts have equal ranks)."""
        return max(1, self.size // max(1, self.local_size))


class MPIWorld(World):
    """World over mpi4py's COMM_WORLD."""

    backend = "mpi"

    def __init__(self) -> None:
        from mpi4py import MPI  # hvd: mpi4py initialises MPI with MPI_THREAD_MULTIPLE

        self.MPI = MPI
        self.comm = MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        local = self.comm.Split_type(MPI.COMM_TYPE_SHARED)
        self.local_rank = local.Get_rank()
        self.local_size = local.Get_size()
        local.Free()

    def barrier(self) -> None:
        self.comm.Barrier()

    def allreduce_sum(self, values: np.ndarray) -> np.ndarray:
        send = np.ascontiguousarray(values, dtype=np.float64)
        out = np.empty_like(send)
        self.comm.Allreduce(send, out, op=self.MPI.SUM)
        return out

    def allgather(self, obj: Any) -> list[Any]:
        return self.comm.allgather(obj)

    def bcast(self, obj: Any, root: int = 0) -> Any:
        return self.comm.bcast(obj, root=root)


HOROVOD_MODULES = {"torch": "horovod.torch", "tf": "horovod.tensorflow"}


def horovod_module(framework: str) -> Any:
    """The Horovod integration of ``framework`` (``torch`` or ``tf``)."""
    return importlib.import_module(HOROVOD_MODULES[framework])  # hvd:


class HorovodWorld(World):
    """World over the collectives of the framework's Horovod; needs ``init_horovod`` done."""

    backend = "horovod"

    def __init__(self, framework: str) -> None:
        self.framework = framework
        self.hvd = hvd = horovod_module(framework)
        self.rank = hvd.rank()
        self.size = hvd.size()
        self.local_rank = hvd.local_rank()
        self.local_size = hvd.local_size()

    def barrier(self) -> None:
        if self.framework == "torch":
            self.hvd.barrier()  # hvd:
        else:  # horovod.tensorflow has no barrier: a one-element allreduce is one
            self.allreduce_sum(np.zeros(1))

    def allreduce_sum(self, values: np.ndarray) -> np.ndarray:
        arr = np.ascontiguousarray(values, dtype=np.float64)
        name = "hvdscale.world.sum"
        if self.framework == "torch":
            import torch

            return self.hvd.allreduce(torch.from_numpy(arr), op=self.hvd.Sum,  # hvd:
                                      name=name).numpy()
        import tensorflow as tf

        return self.hvd.allreduce(tf.constant(arr), op=self.hvd.Sum, name=name).numpy()  # hvd:

    def allgather(self, obj: Any) -> list[Any]:
        # Explicit names: Horovod's default is type(obj).__name__, which can differ by rank.
        return self.hvd.allgather_object(obj, name="hvdscale.world.gather")  # hvd:

    def bcast(self, obj: Any, root: int = 0) -> Any:
        return self.hvd.broadcast_object(obj, root_rank=root,  # hvd:
                                         name="hvdscale.world.bcast")


def init_horovod(env: dict[str, str], framework: str = "torch") -> Any:
    """Export Horovod settings, then ``hvd.init()`` of ``framework``'s integration, once.

    Settings are read once, at init, so they must be in the environment first. Returns the
    initialised Horovod module.
    """
    os.environ.update(env)
    hvd = horovod_module(framework)
    if hvd.is_initialized():
        return hvd
    if is_gloo_launch():
        hvd.init()  # hvd:
    else:
        from mpi4py import MPI

        hvd.init(comm=MPI.COMM_WORLD)  # hvd: share the MPI job mpi4py started
    return hvd


def make_world(use_horovod: bool, framework: str = "torch") -> World:
    """The world for this launch: Horovod's when it is the only channel or the strategy's."""
    if is_gloo_launch() or use_horovod:
        return HorovodWorld(framework)
    return MPIWorld()


def hostname() -> str:
    return socket.gethostname()
