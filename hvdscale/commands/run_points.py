"""``hvdscale run-points``: several points in one launch, as ``hvdscale sweep`` starts them."""

from __future__ import annotations

import argparse
import sys

from hvdscale.commands import common

NAME = "run-points"
# Runs on every rank of a job: the caller (cli) ends the whole job on any error that is not a
# point's own (a point that fails on every rank is recorded and the launch goes on).
ON_EVERY_RANK = True


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The ``run-points`` parser."""
    r = subparsers.add_parser(
        NAME, help="run the points of a launch plan one after another on the launched ranks",
        description="Started by `hvdscale sweep` under mpirun/horovodrun/srun: the ranks start "
        "once, then train and record each point of PLAN (a JSON file the sweep writes in its "
        "logs/ folder), releasing everything a point set up before the next one.")
    r.add_argument("plan", help="the launch plan (JSON) the sweep wrote")
    common.add_out(r)
    common.add_progress(r)
    return r


def handle(args: argparse.Namespace) -> int:
    """Run every point of the plan on this rank; 0 even when some points failed (their failed
    records say why): the launch did what it was asked."""
    from hvdscale.core.progress import ProgressSettings
    from hvdscale.train.points import read_plan, run_points

    plan = read_plan(args.plan)
    failed = run_points(plan, args.out, ProgressSettings(args.progress_every, args.quiet),
                        argv=sys.argv)
    if failed:
        print(f"hvdscale: {failed} of {len(plan.points)} points failed on every rank "
              "(their failed records say why)", flush=True)
    return 0
