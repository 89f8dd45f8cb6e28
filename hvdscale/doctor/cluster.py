"""The planned job's layout (ranks per host from the launch, a hostfile or the SLURM
allocation) and the checks of it: the plan itself and the SLURM allocation."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hvdscale.doctor.lines import FAIL, OK, WARN, Line, Plan


def spread(np: int, hosts: list[str]) -> dict[str, int]:
    """``np`` ranks over ``hosts`` as evenly as possible, the first hosts taking the rest."""
    base, rest = divmod(np, len(hosts))
    return {h: base + (i < rest) for i, h in enumerate(hosts) if base + (i < rest)}


def fill_slots(np: int, slots: list[tuple[str, int]]) -> tuple[dict[str, int], str]:
    """Ranks per host as mpirun places them by slot (each host filled in file order), and the
    error when ``np`` exceeds the slots."""
    hosts, left = {}, np
    for name, n in slots:
        take = min(n, left)
        if take:
            hosts[name] = take
        left -= take
    total = sum(n for _, n in slots)
    err = (f"{np} ranks do not fit the hostfile's {total} slots: raise slots= or lower --np"
           if left > 0 else "")
    return hosts, err


def slurm_nodes(slurm: dict[str, str]) -> list[str]:
    """The allocation's node names when the nodelist is a plain list, else numbered stand-ins
    (``n[1-4]`` needs scontrol to expand; the count is what the plan needs)."""
    nodelist = slurm.get("SLURM_JOB_NODELIST", "")
    count = int(slurm.get("SLURM_JOB_NUM_NODES", "1") or 1)
    if nodelist and "[" not in nodelist:
        return nodelist.split(",")
    return [f"{nodelist or 'node'}#{i + 1}" for i in range(count)]


def layout(np: int, launched: list[str] | None, hostfile: list[tuple[str, int]] | None,
           slurm: dict[str, str], this_host: str) -> tuple[dict[str, int], str, str]:
    """(ranks per host, where that came from, error) for ``np`` planned ranks.

    Args:
        np: planned ranks.
        launched: the host of each launched rank, when the doctor runs under a launcher.
        hostfile: ``(host, slots)`` from ``--hostfile``.
        slurm: the SLURM_* variables (empty outside an allocation).
        this_host: this host's name.
    """
    if launched and len(launched) > 1:
        if np == len(launched):
            return dict(Counter(launched)), "launch", ""
        return spread(np, list(dict.fromkeys(launched))), "launched hosts", ""
    if hostfile:
        hosts, err = fill_slots(np, hostfile)
        return hosts, "hostfile", err
    if slurm.get("SLURM_JOB_ID"):
        return spread(np, slurm_nodes(slurm)), "SLURM allocation", ""
    return {this_host: np}, "this host", ""


def check_plan(plan: Plan) -> Line:
    """The planned ranks per host; fails when they do not fit (more ranks than slots)."""
    hosts = ", ".join(f"{h}={n}" for h, n in plan.hosts.items())
    value = f"{plan.np} rank(s) on {len(plan.hosts)} host(s): {hosts} (from {plan.layout_from})"
    if plan.strategy:
        value += f"; strategy {plan.strategy}"
    if plan.error:
        return Line("plan", FAIL, plan.error)
    return Line("plan", OK, value)


def check_slurm(slurm: dict[str, str], plan: Plan) -> Line:
    """The SLURM allocation the doctor runs in, if any, and whether the planned ranks fit."""
    if not slurm.get("SLURM_JOB_ID"):
        return Line("slurm", OK, "not inside an allocation")
    tasks = slurm.get("SLURM_NTASKS", "")
    value = (f"job {slurm['SLURM_JOB_ID']}: nodes {slurm.get('SLURM_JOB_NODELIST', '?')}, "
             f"{tasks or '?'} task(s)")
    if slurm.get("SLURM_CPUS_PER_TASK"):
        value += f", {slurm['SLURM_CPUS_PER_TASK']} cpu(s)/task"
    if tasks.isdigit() and plan.np > int(tasks):
        return Line("slurm", WARN, f"{value}; {plan.np} ranks planned",
                    f"allocate {plan.np} tasks (salloc -n {plan.np}) or lower --np")
    return Line("slurm", OK, value)


def check_launch(world_size: int, launcher_size: int, backend: str) -> Line:
    """How the doctor itself was started; N separate one-rank jobs (srun without PMIx) fail."""
    if launcher_size > 1 and world_size == 1:
        return Line("ranks", FAIL, f"the launcher started {launcher_size} processes, but each "
                    "is its own one-rank job", "srun --mpi=pmix (or mpirun) joins them")
    if world_size == 1:
        return Line("ranks", OK, "1 (not launched; mpirun -np N hvdscale doctor checks N)")
    return Line("ranks", OK, f"{world_size} launched, facts gathered over {backend}")


def launcher_size(env: dict[str, Any]) -> int:
    """Ranks the launcher's environment says it started (1 when none did)."""
    for var in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS"):
        val = str(env.get(var, ""))
        if val.isdigit() and int(val) > 0:
            return int(val)
    return 1
