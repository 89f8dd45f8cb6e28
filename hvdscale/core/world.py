"""Who this process is among the ranks, and the few collectives the harness needs.

Two backends answer the same questions:

* ``MPIWorld`` over mpi4py's COMM_WORLD: launches by ``mpirun``, ``srun --mpi=pmix`` and
  ``horovodrun`` in MPI mode.
* ``HorovodWorld`` over Horovod's own collectives: ``horovodrun --gloo`` starts processes with no
  MPI job behind them (mpi4py would see N singletons), so Horovod is the only channel there.
* ``TorchWorld`` (``hvdscale.core.world_torch``) over a gloo group of torch.distributed on
  torchrun's store: ``torchrun`` starts processes with no MPI job, on machines that may have
  no MPI at all, so mpi4py is imported by ``MPIWorld`` alone.

``launch_kind`` says which launch started the process (``mpi``, ``gloo``, ``torchrun``); the
registry says which launches each strategy runs under.

Horovod is started once per process, through the integration of the framework in use (its
package's ``HOROVOD`` collectives name the module, e.g. ``horovod.torch``): each integration
loads its own copy of Horovod's runtime, so touching another would start a second runtime (and
import its framework). Nothing here names a framework.

The harness's collectives (barrier around the timed window, gathering timings, summing token
counts) are off the hot path; the strategies bring their own communication.
"""

from __future__ import annotations

import importlib
import os
import socket
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

RANK_ENV_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "HOROVOD_RANK")
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
"""What torchrun (or a launcher of its kind: a PyTorchJob's pods) sets in every rank."""


def is_torchrun_launch() -> bool:
    """True when torchrun started this process: its agent's ``TORCHELASTIC_RUN_ID``, or its
    rank variables with no MPI or Horovod launcher's (a PyTorchJob's pods; under ``srun``
    plus torchrun, ``SLURM_PROCID`` numbers the nodes, torchrun's ``RANK`` the ranks)."""
    if "TORCHELASTIC_RUN_ID" in os.environ:
        return True
    return (all(v in os.environ for v in TORCHRUN_VARS)
            and not any(v in os.environ for v in RANK_ENV_VARS))


def launch_kind() -> str:
    """Which launch started this process: ``torchrun``, ``gloo`` (horovodrun --gloo) or
    ``mpi`` (an MPI launcher, or none: one rank of its own)."""
    if is_torchrun_launch():
        return "torchrun"
    return "gloo" if is_gloo_launch() else "mpi"


def launch_rank() -> int:
    """This process's rank as the launcher's environment states it (0 when not launched)."""
    for var in ("RANK",) if is_torchrun_launch() else RANK_ENV_VARS:
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

    def close(self) -> None:
        """Release what this world holds of its own (nothing, unless it says otherwise)."""

    def rendezvous_store(self, name: str) -> Any:
        """A key-value store every rank already shares (the launcher's), under a prefix of its
        own for ``name``; None: the world has none, and ``hvdscale.core.rendezvous`` has rank
        0 bind one."""
        return None

    @property
    def cross_size(self) -> int:
        """Number of hosts (derived from the local size; exact when hosts have equal ranks)."""
        return max(1, self.size // max(1, self.local_size))


class MPIWorld(World):
    """World over mpi4py's COMM_WORLD."""

    backend = "mpi"

    def __init__(self, own_comm: bool = False) -> None:
        """``own_comm``: talk on a duplicate of COMM_WORLD (one point of a shared launch; see
        ``close``) instead of COMM_WORLD itself."""
        from mpi4py import MPI  # hvd: mpi4py initialises MPI with MPI_THREAD_MULTIPLE

        self.MPI = MPI
        self.comm = MPI.COMM_WORLD.Dup() if own_comm else MPI.COMM_WORLD  # hvd: collective
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

    def close(self) -> None:
        """Free a duplicated communicator (COMM_WORLD itself stays)."""
        if self.comm != self.MPI.COMM_WORLD and self.comm != self.MPI.COMM_NULL:
            self.comm.Free()  # hvd: collective; every rank of the point frees it


SUM_NAME = "hvdscale.world.sum"
"""The Horovod request name of the harness's sums (and of a barrier made of one)."""


class HorovodCollectives(Protocol):
    """What ``HorovodWorld`` needs of one framework's Horovod integration; each framework
    package provides one as its ``HOROVOD`` hook."""

    module: str
    """The integration's module (e.g. ``horovod.torch``), which ``init_horovod`` starts."""

    def barrier(self) -> None:
        """Wait until every rank has called this."""
        ...

    def allreduce_sum(self, values: np.ndarray, name: str) -> np.ndarray:
        """Elementwise sum of a contiguous float64 array over all ranks, as request ``name``."""
        ...

    def allreduce_op(self, nbytes: int, name: str) -> Callable[[], object]:
        """One in-place float32 sum-allreduce of ``nbytes`` bytes as request ``name``, ready to
        call again and again (what ``hvdscale commbench`` times)."""
        ...


class HorovodWorld(World):
    """World over the collectives of the framework's Horovod; needs ``init_horovod`` done."""

    backend = "horovod"

    def __init__(self, horovod: HorovodCollectives) -> None:
        self.collectives = horovod
        self.hvd = hvd = importlib.import_module(horovod.module)  # hvd:
        self.rank = hvd.rank()
        self.size = hvd.size()
        self.local_rank = hvd.local_rank()
        self.local_size = hvd.local_size()

    def barrier(self) -> None:
        self.collectives.barrier()  # hvd:

    def allreduce_sum(self, values: np.ndarray) -> np.ndarray:
        arr = np.ascontiguousarray(values, dtype=np.float64)
        return self.collectives.allreduce_sum(arr, SUM_NAME)  # hvd:

    def allgather(self, obj: Any) -> list[Any]:
        # Explicit names: Horovod's default is type(obj).__name__, which can differ by rank.
        return self.hvd.allgather_object(obj, name="hvdscale.world.gather")  # hvd:

    def bcast(self, obj: Any, root: int = 0) -> Any:
        return self.hvd.broadcast_object(obj, root_rank=root,  # hvd:
                                         name="hvdscale.world.bcast")


def init_horovod(env: dict[str, str], module: str) -> Any:
    """Export Horovod settings, then ``hvd.init()`` of the integration ``module``, once.

    ``module`` is a framework's Horovod integration (``horovod.torch``, its ``HOROVOD.module``).
    Settings are read once, at init, so they must be in the environment first. Returns the
    initialised Horovod module.
    """
    os.environ.update(env)
    hvd = importlib.import_module(module)  # hvd:
    if hvd.is_initialized():
        return hvd
    if is_gloo_launch():
        hvd.init()  # hvd:
    else:
        from mpi4py import MPI

        hvd.init(comm=MPI.COMM_WORLD)  # hvd: share the MPI job mpi4py started
    return hvd


def make_world(use_horovod: bool, horovod: HorovodCollectives, own_comm: bool = False) -> World:
    """The world for this launch: torchrun's under torchrun (Horovod never runs there); else
    Horovod's when it is the only channel or the strategy's; ``own_comm``: an MPI world on a
    communicator of its own (``MPIWorld``; a ``TorchWorld`` always has a group of its own)."""
    if is_torchrun_launch():
        from hvdscale.core.world_torch import TorchWorld

        return TorchWorld()
    if is_gloo_launch() or use_horovod:
        return HorovodWorld(horovod)
    return MPIWorld(own_comm)


def hostname() -> str:
    return socket.gethostname()
