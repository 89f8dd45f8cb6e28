"""The doctor on every rank: gather this rank's facts, gather them all on rank 0, judge, print.

Every rank takes part in the same two collectives (an allgather of facts and, with
``--bench``, the allreduces), after bounded work only (each probe has a time limit), and the
command runs under the CLI's every-rank supervision: a rank that fails ends the whole job.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import asdict, dataclass
from typing import Any

from hvdscale.core.faults import maybe_fault
from hvdscale.core.supervise import abort_job
from hvdscale.core.world import RANK_ENV_VARS, MPIWorld, World, is_gloo_launch, is_torchrun_launch
from hvdscale.doctor import cluster, host, network, ranks, report, software
from hvdscale.doctor.bench import BUDGET_S, allreduce_bench, check_bench
from hvdscale.doctor.gather import gather
from hvdscale.doctor.lines import FAIL, WARN, Line, Plan, worst
from hvdscale.errors import HvdscaleError


@dataclass(frozen=True)
class DoctorArgs:
    """What the user asked for (``hvdscale doctor``'s options)."""

    np: int | None = None
    hostfile: list[tuple[str, int]] | None = None
    strategy: str | None = None
    out: str = "results"
    bench: bool = False
    json: bool = False
    timeout: float = 120.0
    deadline: float | None = None
    """Seconds a rank may take in all before the job is ended (None: the probes' limit + 60,
    plus the bench's budget)."""


@dataclass(frozen=True)
class Launch:
    """How the doctor itself runs: ranks joined, and what the launcher says it started."""

    size: int = 1
    backend: str = "none"
    launcher_size: int = 1


def make_plan(args: DoctorArgs, facts: list[dict[str, Any]]) -> Plan:
    """The planned job: ``--np`` (else the launched ranks, the hostfile's slots, the SLURM
    tasks, or 1) laid out over hosts."""
    slurm = facts[0]["slurm"]
    launched = [f["host"] for f in facts] if len(facts) > 1 else None
    np = args.np or (len(facts) if launched else None)
    if np is None and args.hostfile:
        np = sum(n for _, n in args.hostfile)
    if np is None:
        tasks = slurm.get("SLURM_NTASKS", "")
        np = int(tasks) if tasks.isdigit() and slurm.get("SLURM_JOB_ID") else 1
    hosts, source, err = cluster.layout(np, launched, args.hostfile, slurm, facts[0]["host"])
    return Plan(np, args.strategy, args.out, hosts, source, err)


def _by_host(facts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One facts dict per host (the rank that read the host's facts), rank 0's host first."""
    seen: dict[str, dict[str, Any]] = {}
    for f in facts:
        if f["host"] not in seen or (f.get("hostfacts") and not seen[f["host"]].get("hostfacts")):
            seen[f["host"]] = f
    return list(seen.values())


def usable_cores(facts: list[dict[str, Any]], name: str) -> int:
    """Cores the ranks on host ``name`` may run on: the union of their affinities."""
    return len(set().union(*(f["affinity"] for f in facts if f["host"] == name))) or 1


def judge(facts: list[dict[str, Any]], plan: Plan, launch: Launch,
          bench: Line | None = None) -> list[Line]:
    """Every report line from every rank's facts (rank 0's first): a pure function."""
    hosts = _by_host(facts)
    first = hosts[0]
    lines = [cluster.check_launch(launch.size, launch.launcher_size, launch.backend),
             cluster.check_plan(plan), cluster.check_slurm(first["slurm"], plan)]
    lines += software.software_lines(first, plan)
    for h in hosts:
        here = plan.hosts.get(h["host"], plan.most_per_host if len(hosts) == 1 else 0)
        for ln in host.host_lines(h, max(1, here), usable_cores(facts, h["host"])):
            name = ln.check if len(hosts) == 1 else f"{ln.check} ({h['host']})"
            lines.append(Line(name, ln.status, ln.value, ln.fix))
    lines.append(network.check_interfaces(first["net"], len(plan.hosts)))
    lines.append(network.check_common([h["net"] for h in hosts], len(plan.hosts)))
    lines += ranks.differences(facts)
    return [*lines, bench] if bench is not None else lines


def _world() -> World | None:
    """The launched job's world (MPI's, or torchrun's); None when no launcher started this
    process."""
    if is_torchrun_launch():
        from hvdscale.core.world_torch import TorchWorld

        return TorchWorld()  # hvd: joins torchrun's store; no MPI needed
    if is_gloo_launch():
        raise HvdscaleError("the doctor gathers over MPI: launch it with mpirun, srun "
                            "--mpi=pmix or horovodrun without --gloo")
    if any(v in os.environ for v in RANK_ENV_VARS if v != "HOROVOD_RANK"):
        return MPIWorld()  # hvd: joins the job the launcher started
    return None


class Deadline:
    """Ends the job when this rank has not finished in ``seconds``: a rank stuck outside the
    probes' own limits (a hung file system, a frozen peer) must not leave the others waiting
    in a collective. Uses no collective itself; says where this rank was."""

    def __init__(self, seconds: float, rank: int) -> None:
        self.seconds, self.rank, self.phase = seconds, rank, "start-up"
        self._done = threading.Event()
        threading.Thread(target=self._watch, name="hvdscale-doctor-deadline",
                         daemon=True).start()

    def _watch(self) -> None:
        if self._done.wait(self.seconds):
            return
        sys.stderr.write(f"hvdscale: error (rank {self.rank}): the doctor did not finish "
                         f"within {self.seconds:g}s (rank {self.rank} was {self.phase}); "
                         "ending the job.\n")
        sys.stderr.flush()
        abort_job(3)

    def stop(self) -> None:
        """This rank has finished."""
        self._done.set()


def deadline_s(args: DoctorArgs) -> float:
    """Seconds a rank may take in all: ``--deadline``, else the probes' limit, the others'
    probes (run alongside), slack, and the bench's budget with ``--bench``."""
    return args.deadline or args.timeout + 60 + (2 * BUDGET_S if args.bench else 0)


def doctor(args: DoctorArgs) -> int:
    """Run the doctor on this rank; rank 0 prints the report. Returns the exit status."""
    world = _world()
    rank = world.rank if world else 0
    deadline = Deadline(deadline_s(args), rank)
    try:
        return _on_this_rank(args, world, deadline)
    finally:
        deadline.stop()


def _on_this_rank(args: DoctorArgs, world: World | None, deadline: Deadline) -> int:
    deadline.phase = "gathering its facts"
    facts = gather(args.out, with_host=world is None or world.local_rank == 0,
                   timeout=args.timeout)
    maybe_fault(world.rank if world else 0, "gather")  # tests: a rank that fails here
    deadline.phase = "waiting for the other ranks' facts"
    all_facts = world.allgather(facts) if world is not None else [facts]  # hvd:
    launch = Launch(world.size if world else 1, world.backend if world else "none",
                    cluster.launcher_size(dict(os.environ)))
    bench_line, points = None, []
    if args.bench and world is not None and not isinstance(world, MPIWorld):
        bench_line = Line("bench", WARN, "skipped: the allreduce bench runs over MPI",
                          "mpirun -np 2 hvdscale doctor --bench")
    elif args.bench:
        if world is not None and world.size > 1:
            deadline.phase = "in the allreduce bench"
            points = allreduce_bench(world.comm)
        link, expected = network.link_class([h["net"] for h in _by_host(all_facts)])
        bench_line = check_bench(points, link, expected, launch.size)
    if world is not None and world.rank != 0:
        return 0
    plan = make_plan(args, all_facts)
    lines = judge(all_facts, plan, launch, bench_line)
    if args.json:
        sys.stdout.write(report.as_json(lines, {"plan": asdict(plan), "bench": points,
                                                "facts": all_facts}))
    else:
        title = (f"hvdscale doctor: {launch.size} rank(s) on {len(_by_host(all_facts))} "
                 f"host(s); planned: {plan.np} rank(s)")
        sys.stdout.write(report.text(lines, title))
    sys.stdout.flush()
    return 1 if worst(lines) == FAIL else 0
