"""Checks of one host: its GPUs, cores per rank for the planned ranks, its current load, and
the free space where results go. Pure functions of gathered facts."""

from __future__ import annotations

from typing import Any

from hvdscale.doctor.lines import FAIL, OK, WARN, Line
from hvdscale.doctor.software import code_version

GIB = 1024**3
MIN_FREE = 100 * 1024**2
"""Below this a sweep cannot write its records: fail."""
LOW_FREE = GIB
"""Below this a long sweep with plots and timelines may run out: warn."""


def threads_per_rank(cores: int, ranks: int, omp_threads: str | None) -> int:
    """Compute threads each rank will run: ``OMP_NUM_THREADS`` if set, else the host's cores
    shared among its ranks (what ``threads.intra_op=0`` resolves to)."""
    if omp_threads and omp_threads.isdigit() and int(omp_threads) > 0:
        return int(omp_threads)
    return max(1, cores // max(1, ranks))


def gpu_table(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """The GPUs this host's frameworks see (torch's table, else TensorFlow's)."""
    probes = (facts.get("hostfacts") or {}).get("probes") or {}
    for fw in ("torch", "tf"):
        if (probes.get(fw) or {}).get("gpus"):
            return probes[fw]["gpus"]
    return []


def check_gpus(facts: dict[str, Any], ranks_here: int) -> Line:
    """GPUs of this host (model, memory, driver, CUDA, cuDNN); none on a CPU build is fine."""
    host = facts.get("hostfacts") or {}
    probes = host.get("probes") or {}
    build = next((p for p in (probes.get("torch"), probes.get("tf")) if p and p.get("ok")), {})
    gpus = gpu_table(facts)
    if not gpus:
        if build.get("cuda"):
            return Line("gpus", WARN, f"none visible to a CUDA {build['cuda']} build",
                        "check the driver (nvidia-smi) and CUDA_VISIBLE_DEVICES")
        return Line("gpus", OK, "none (CPU build)")
    models = sorted({g["name"] for g in gpus})
    mem = min(g["memory"] for g in gpus)
    stack = [f"driver {host.get('driver') or '?'}", f"CUDA {build.get('cuda') or '?'}",
             f"cuDNN {code_version(build.get('cudnn')) or 'none'}"]
    value = (f"{len(gpus)} x {' + '.join(models)}"
             + (f" ({mem / GIB:.0f} GiB)" if mem else "") + ", " + ", ".join(stack))
    if len(models) > 1:
        return Line("gpus", WARN, value, "mixed models: the slowest sets the pace")
    if ranks_here > len(gpus):
        return Line("gpus", WARN, f"{value}; {ranks_here} ranks share them",
                    f"at most {len(gpus)} ranks per host (one per GPU)")
    return Line("gpus", OK, value)


def check_cores(cores: int, ranks_here: int, omp_threads: str | None, host_cores: int) -> Line:
    """Cores per rank for the planned ranks on this host; warns when ranks x threads exceed
    the cores (oversubscribed ranks slow every collective).

    Args:
        cores: the cores the ranks may run on (their affinity; a launcher may bind them).
        ranks_here: ranks planned on this host.
        omp_threads: ``OMP_NUM_THREADS`` if set.
        host_cores: the host's cores, for the message.
    """
    threads = threads_per_rank(cores, ranks_here, omp_threads)
    value = f"{ranks_here} rank(s) x {threads} thread(s) on {cores} core(s)"
    if cores < host_cores:
        value += f" of the host's {host_cores} (the ranks' affinity)"
    if ranks_here > cores:
        return Line("cores", WARN, f"{value}: more ranks than cores",
                    f"at most {cores} ranks per host, or add hosts (--hostfile)")
    if ranks_here * threads > cores:
        return Line("cores", WARN, f"{value}: threads oversubscribe",
                    f"OMP_NUM_THREADS={max(1, cores // ranks_here)} or unset it")
    return Line("cores", OK, value)


def check_load(load1: float, cores: int, ranks_here: int, threads: int) -> Line:
    """The host's 1-minute load against the cores the planned ranks need: a busy host makes
    every measurement read slow. Half a core of slack is allowed for the doctor's own start."""
    need = ranks_here * threads
    free = cores - load1
    value = f"load {load1:.2f} on {cores} core(s): {max(0.0, free):.1f} free, {need} needed"
    if free + 0.5 < need:
        return Line("load", WARN, value + " (busy)",
                    "wait for a quiet host, or measure with sweep --repeats")
    return Line("load", OK, value)


def check_disk(disk: dict[str, Any]) -> Line:
    """Free space and write access where the results go."""
    where = disk["out"] + ("" if disk["existing"].endswith(disk["out"].rstrip("/"))
                           else f" (under {disk['existing']})")
    value = f"{disk['free'] / GIB:.1f} GiB free at {where}"
    if not disk["writable"]:
        return Line("disk", FAIL, f"{where} is not writable", "choose --out DIR you can write")
    if disk["free"] < MIN_FREE:
        return Line("disk", FAIL, value, "free space or choose another --out")
    if disk["free"] < LOW_FREE:
        return Line("disk", WARN, value, "free space or choose another --out")
    return Line("disk", OK, value)


def host_lines(facts: dict[str, Any], ranks_here: int, usable: int) -> list[Line]:
    """Every host check for one host's facts and the ranks planned on it.

    Args:
        facts: the host's facts (the rank that read them).
        ranks_here: ranks planned on the host.
        usable: cores its ranks may run on (the union of their affinities).
    """
    omp, host_cores = facts["omp_threads"], facts["cores"]
    threads = threads_per_rank(usable, ranks_here, omp)
    return [check_gpus(facts, ranks_here), check_cores(usable, ranks_here, omp, host_cores),
            check_load(facts["load"][0], host_cores, ranks_here, threads),
            check_disk(facts["disk"])]
