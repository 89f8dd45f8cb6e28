"""This rank's facts, as one plain dict (picklable, JSON-ready) that the checks judge.

Cheap facts (versions from package metadata, cores, load, disk, interfaces, SLURM) are read on
every rank; the costly ones (importing the frameworks, loading Horovod's extensions, the GPU
driver) once per host, by its first rank, since every rank of a host shares them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from hvdscale.core.world import hostname, launch_kind
from hvdscale.doctor.network import interface_facts
from hvdscale.doctor.probe import run_probes
from hvdscale.records.provenance import versions
from hvdscale.registry import LIBRARIES

LAUNCHERS = ("mpirun", "horovodrun", "srun", "torchrun")
SLURM_VARS = ("SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES", "SLURM_NTASKS",
              "SLURM_TASKS_PER_NODE", "SLURM_CPUS_PER_TASK", "SLURM_PROCID")


def horovod_metadata() -> dict[str, str] | None:
    """The framework versions Horovod recorded when it was built (its ``metadata.json``), read
    without importing Horovod; None when Horovod or the file is missing."""
    spec = importlib.util.find_spec("horovod")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "metadata.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else None


def disk_facts(out: str) -> dict[str, Any]:
    """Free space and writability where results go: ``out``, or its nearest existing parent."""
    p = Path(out).resolve()
    while not p.exists() and p != p.parent:
        p = p.parent
    usage = shutil.disk_usage(p)
    return {"out": out, "existing": str(p), "free": usage.free, "total": usage.total,
            "writable": os.access(p, os.W_OK)}


def gpu_driver() -> str | None:
    """The NVIDIA driver version (``nvidia-smi``), None without one."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        r = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = r.stdout.strip().splitlines()
    return first[0].strip() if r.returncode == 0 and first else None


def host_facts(timeout: float) -> dict[str, Any]:
    """The costly facts every rank of a host shares: framework probes and the GPU driver."""
    installed = [fw for fw, lib in LIBRARIES.items() if importlib.util.find_spec(lib)]
    return {"probes": run_probes(installed, timeout), "driver": gpu_driver(),
            "horovod_built_for": horovod_metadata()}


def rank_facts(out: str) -> dict[str, Any]:
    """What every rank reads for itself, all of it cheap (no framework is imported)."""
    import psutil

    return {
        "host": hostname(),
        "python": platform.python_version(),
        "executable": sys.executable,
        "versions": versions(),
        "launchers": {name: shutil.which(name) for name in LAUNCHERS},
        "launch": launch_kind(),
        "cores": os.cpu_count() or 1,
        "affinity": sorted(os.sched_getaffinity(0)),
        "load": list(psutil.getloadavg()),
        "omp_threads": os.environ.get("OMP_NUM_THREADS"),
        "disk": disk_facts(out),
        "net": interface_facts(),
        "slurm": {k: os.environ[k] for k in SLURM_VARS if k in os.environ},
    }


def gather(out: str, with_host: bool, timeout: float = 120.0) -> dict[str, Any]:
    """This rank's facts; ``with_host``: also the host's costly ones (its first rank)."""
    facts = rank_facts(out)
    facts["hostfacts"] = host_facts(timeout) if with_host else None
    return facts
