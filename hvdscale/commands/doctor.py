"""``hvdscale doctor``: check this machine (or every host of a launch) before a job."""

from __future__ import annotations

import argparse

from hvdscale.commands import common

NAME = "doctor"
# Under mpirun/srun every rank gathers its facts: the caller (cli) ends the whole job on any
# error, so no rank waits in the gather for one that has failed.
ON_EVERY_RANK = True


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The ``doctor`` parser."""
    d = subparsers.add_parser(
        NAME, help="check this machine (or every host of a launch) before a job",
        description="Prints one ok/warn/fail line per check with its fix; exits 1 on a fail. "
        "Under mpirun/srun every rank reports and rank 0 shows what differs between them.")
    d.add_argument("--np", type=int, default=None,
                   help="ranks the job will run (default: the launched ranks, the hostfile's "
                   "slots, the SLURM tasks, or 1)")
    common.add_hostfile(d, "'HOST slots=N' hostfile the job will use")
    d.add_argument("--strategy", default=None,
                   help="the strategy the job will use (horovod, ps, independent, ddp, mwms)")
    common.add_out(d)
    d.add_argument("--bench", action="store_true",
                   help="also time a short allreduce against the link's expected bandwidth")
    common.add_json(d, "print the lines and the gathered facts as JSON")
    common.add_timeout(d, 120.0, "limit of each framework probe in seconds (default: 120)")
    d.add_argument("--deadline", type=float, default=None, metavar="S",
                   help="end the whole job when a rank has not finished in S seconds (default: "
                   "--timeout + 60, plus the bench's budget with --bench)")
    return d


def handle(args: argparse.Namespace) -> int:
    """Check the options, run the doctor on this rank; rank 0 prints."""
    from hvdscale.doctor.run import DoctorArgs, doctor
    from hvdscale.errors import HvdscaleError
    from hvdscale.registry import names

    if args.deadline is not None and args.deadline <= 0:
        raise HvdscaleError(f"--deadline must be > 0 seconds (got {args.deadline:g})")
    if args.np is not None and args.np < 1:
        raise HvdscaleError(f"--np must be >= 1 (got {args.np})")
    if args.strategy is not None and args.strategy not in names():
        raise HvdscaleError(f"--strategy must be one of {', '.join(names())} "
                            f"(got {args.strategy!r})")
    slots = None
    if args.hostfile:
        from hvdscale.study.sweep.hostfile import parse_hostfile

        slots = [(h.name, h.slots) for h in parse_hostfile(args.hostfile).hosts]
    return doctor(DoctorArgs(args.np, slots, args.strategy, args.out, args.bench, args.json,
                             args.timeout, args.deadline))
