"""Who this process is among the ranks, the few collectives the harness needs, and fail-fast.

Two backends answer the same questions:

* ``MPIWorld`` over mpi4py's COMM_WORLD: launches by ``mpirun``, ``srun --mpi=pmix`` and
  ``horovodrun`` in MPI mode.
* ``HorovodWorld`` over Horovod's own collectives: ``horovodrun --gloo`` starts processes with no
  MPI job behind them (mpi4py would see N singletons), so Horovod is the only channel there.

The harness's collectives (barrier around the timed window, gathering timings, summing token
counts) are off the hot path; the strategies bring their own communication.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from hvdscale.errors import HvdscaleError

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


class HorovodWorld(World):
    """World over Horovod's collectives (``horovod.torch``); needs ``hvd.init()`` done."""

    backend = "horovod"

    def __init__(self) -> None:
        import horovod.torch as hvd  # hvd:

        self.hvd = hvd
        self.rank = hvd.rank()
        self.size = hvd.size()
        self.local_rank = hvd.local_rank()
        self.local_size = hvd.local_size()

    def barrier(self) -> None:
        self.hvd.barrier()  # hvd:

    def allreduce_sum(self, values: np.ndarray) -> np.ndarray:
        import torch

        t = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float64))
        return self.hvd.allreduce(t, op=self.hvd.Sum, name="hvdscale.world.sum").numpy()  # hvd:

    def allgather(self, obj: Any) -> list[Any]:
        # Explicit names: Horovod's default is type(obj).__name__, which can differ by rank.
        return self.hvd.allgather_object(obj, name="hvdscale.world.gather")  # hvd:

    def bcast(self, obj: Any, root: int = 0) -> Any:
        return self.hvd.broadcast_object(obj, root_rank=root,  # hvd:
                                         name="hvdscale.world.bcast")


def init_horovod(env: dict[str, str]) -> None:
    """Export Horovod settings, then ``hvd.init()``: settings are read once, at init."""
    os.environ.update(env)
    import horovod.torch as hvd  # hvd:

    if is_gloo_launch():
        hvd.init()  # hvd:
    else:
        from mpi4py import MPI

        hvd.init(comm=MPI.COMM_WORLD)  # hvd: share the MPI job mpi4py started


def make_world(use_horovod: bool) -> World:
    """The world for this launch: Horovod's when it is the only channel or the strategy's."""
    if is_gloo_launch() or use_horovod:
        return HorovodWorld()
    return MPIWorld()


def hostname() -> str:
    return socket.gethostname()


def cores_on_host() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def resolve_threads(intra_op: int, inter_op: int, local_size: int) -> tuple[int, int]:
    """Threads per rank: 0 intra-op threads means this host's cores shared among its ranks."""
    intra = intra_op or max(1, cores_on_host() // max(1, local_size))
    return intra, inter_op


def thread_env(intra: int, mpi_yield: str, local_size: int) -> dict[str, str]:
    """Environment for the math libraries' thread pools and MPI's idle policy, set before
    they load (OpenMPI reads OMPI_MCA_* at MPI_Init)."""
    n = str(intra)
    env = {"OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n, "OPENBLAS_NUM_THREADS": n,
           "TF_NUM_INTRAOP_THREADS": n}
    busy_threads = local_size * (intra + 1)  # +1: Horovod's or MPI's progress thread
    if mpi_yield == "on" or (mpi_yield == "auto" and busy_threads > cores_on_host()):
        env["OMPI_MCA_mpi_yield_when_idle"] = "1"
    elif mpi_yield == "off":
        env["OMPI_MCA_mpi_yield_when_idle"] = "0"
    return env


# --- fail fast ---------------------------------------------------------------------------------

# Ranks other than the lowest wait this long before reporting an input error, so that an error
# every rank hits identically (a bad config) is printed once, by rank 0, whose abort ends them.
_ECHO_DELAY_S = 3.0


def abort_job(code: int) -> None:
    """End every rank now, using no collective (the others may be inside one).

    With MPI up, MPI_Abort makes the launcher kill the job; otherwise (``--gloo``, or before
    MPI_Init) the non-zero exit does, as mpirun and horovodrun end a job when a rank fails.
    """
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        mpi.COMM_WORLD.Abort(code)
    os._exit(code)


def report_and_abort(exc: BaseException, rank: int) -> None:
    """Print ``exc`` once, naming the rank, and end the whole job with a non-zero exit."""
    code = 2 if isinstance(exc, HvdscaleError) else 1
    if isinstance(exc, HvdscaleError):
        if rank != 0:
            time.sleep(_ECHO_DELAY_S)
        msg = f"hvdscale: error (rank {rank}): {exc}\n"
    else:
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        msg = f"hvdscale: rank {rank} failed:\n{tb}"
    sys.stderr.write(msg)
    sys.stderr.flush()
    sys.stdout.flush()
    abort_job(code)


class StepWatchdog:
    """Ends the job when one step runs longer than ``timeout_s`` (a stuck or very slow rank).

    ``phase()`` says what this rank is doing: ``compute`` (its own forward/backward) or
    ``communicate`` (waiting on the other ranks). The rank whose step overruns in ``compute`` is
    the slow one and says so; ranks overrunning while waiting report after a grace period, so
    the slow rank's message is the one shown when its watchdog can still run.
    """

    GRACE_S = 5.0

    def __init__(self, timeout_s: float, rank: int,
                 phase: Callable[[], str] = lambda: "compute") -> None:
        self.timeout_s = timeout_s
        self.rank = rank
        self.phase = phase
        self._deadline: float | None = None
        self._step = -1
        self._lock = threading.Lock()
        if timeout_s > 0:
            threading.Thread(target=self._watch, name="hvdscale-watchdog", daemon=True).start()

    def start_step(self, step: int) -> None:
        with self._lock:
            self._step = step
            self._deadline = time.monotonic() + self.timeout_s

    def end_step(self) -> None:
        with self._lock:
            self._deadline = None

    def stop(self) -> None:
        with self._lock:
            self._deadline = None
            self.timeout_s = 0.0

    def _late(self) -> tuple[bool, int]:
        with self._lock:
            late = self._deadline is not None and time.monotonic() > self._deadline
            return late, self._step

    def _watch(self) -> None:
        while self.timeout_s > 0:
            time.sleep(min(1.0, self.timeout_s / 4))
            late, step = self._late()
            if not late:
                continue
            t = self.timeout_s
            if self.phase() == "compute":
                msg = (f"hvdscale: error (rank {self.rank}): rank {self.rank} is the slow rank: "
                       f"step {step} has been computing on it for more than "
                       f"measure.step_timeout_s={t:g}s; ending the job.\n")
            else:
                time.sleep(self.GRACE_S)  # let the slow rank name itself first
                if not self._late()[0]:
                    continue
                msg = (f"hvdscale: error (rank {self.rank}): step {step}: rank {self.rank} has "
                       f"waited more than measure.step_timeout_s={t:g}s for the other ranks; a "
                       "rank that is not waiting is stuck (Horovod's stall warning, if shown, "
                       "lists the missing ranks); ending the job.\n")
            sys.stderr.write(msg)
            sys.stderr.flush()
            abort_job(3)
