"""``hvdscale sweep``: every (ranks, framework, strategy) point, one launch per round and rank
count, then the report."""

from __future__ import annotations

import argparse
import functools
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from hvdscale.commands import common
from hvdscale.errors import HvdscaleError

NAME = "sweep"
DEFAULT_BUDGET_S = 1200.0
"""``--decide``'s budget when ``--budget`` is not given: 20 minutes."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The ``sweep`` parser."""
    sw = subparsers.add_parser(
        NAME, help="run every (ranks, framework, strategy) point, one launch per round and rank "
        "count, then the report",
        description="Launch the points with mpirun, horovodrun or srun: the points of one rank "
        "count start their ranks once per round and run one after another in them "
        "(--launch-per-point: a launch each); one progress line per "
        "point; a failed point is recorded as failed and the sweep goes on; points already "
        "recorded (same config and ranks) are skipped unless --redo. With --repeats N every point "
        "runs N times in interleaved rounds, and the report shows medians, ranges and paired "
        "ratios. A point launched on a busy host is warned about, and marked in the report. "
        "Ends with the report.")
    common.add_config(sw)
    sw.add_argument("--np", required=True, metavar="N,N,...",
                    help="rank counts, comma-separated, e.g. 1,2,4")
    sw.add_argument("--strategies", default="horovod,ps,independent", metavar="S,S,...",
                    help="strategies, comma-separated (default: horovod,ps,independent)")
    sw.add_argument("--frameworks", default=None, metavar="F,F,...",
                    help="frameworks, comma-separated: torch, tf (default: the config's)")
    common.add_launcher(sw, "how each point is launched (default: mpirun)")
    common.add_hostfile(sw, "'HOST slots=N' hostfile for mpirun or horovodrun (validated first)")
    sw.add_argument("--network-interfaces", default=None, metavar="NIC",
                    help="interface(s) the ranks talk over, e.g. eth0 (multi-host)")
    sw.add_argument("--launcher-args", default="", metavar="ARGS",
                    help="extra launcher arguments, one shell-quoted string")
    common.add_set(sw, common.FOR_EVERY_POINT)
    common.add_out(sw)
    common.add_timeout(sw)
    _add_grid(sw)
    sw.add_argument("--redo", action="store_true",
                    help="measure points again even when already recorded")
    sw.add_argument("--progress-every", type=common.seconds, default=None, metavar="S",
                    help="seconds between the progress lines each point writes to its log "
                    "(logs/*.stdout; default: hvdscale run's 10)")
    sw.add_argument("--launch-per-point", action="store_true",
                    help="start every point in a launch of its own (the ranks start again for "
                    "each point) instead of one launch per round and rank count")
    common.add_no_plot(sw, "report without PNG plots")
    sw.add_argument("--dry-run", action="store_true",
                    help="check the input and print the grid, each launch's command and its "
                    "points; launch nothing")
    return sw


def _add_grid(sw: argparse.ArgumentParser) -> None:
    """The grid's further axes and its rounds."""
    sw.add_argument("--repeats", type=int, default=1, metavar="N",
                    help="interleaved rounds of every point (round 1 of all, then round 2, "
                    "order rotated); the report shows medians, ranges and paired ratios; "
                    "a rerun fills only missing rounds (default: 1)")
    sw.add_argument("--scale-lr", default=None, metavar="RULE,RULE,...",
                    help="learning-rate rules to compare, one more sweep axis (weak scaling): "
                    "none, linear, sqrt, legw, sqrt_adam; the report names the rule that "
                    "reached the quality target first (default: the config's optim.scale_lr)")
    sw.add_argument("--decide", action="store_true",
                    help="measure until decided: 3 rounds at least, then one more round at a "
                    "time for the points of the comparisons still undecided (every pair of "
                    "series at a rank count), nearest to a decision first, within --budget "
                    "(docs/running.md, \"Measuring until decided\")")
    sw.add_argument("--budget", type=common.duration, default=None, metavar="TIME",
                    help="--decide's wall-time budget for the whole sweep, e.g. 150s or 20m "
                    "(default: 20m); the first 3 rounds always run")
    sw.add_argument("--axis", action="append", default=[], metavar="KEY=V,V,...",
                    help="one more axis of the grid: a config key and its values, e.g. "
                    "--axis strategy.horovod.fusion_threshold_mb=0,32,128 or --axis "
                    "strategy.ddp.bucket_cap_mb=1,25; several --axis make a product")


def handle(args: argparse.Namespace) -> int:
    """Plan (all input checked, nothing launched), run the points, write and print the report.

    Returns 0 when every point is recorded ok, 1 when some point failed (after the report).
    """
    from hvdscale.study.report.report import write_report
    from hvdscale.study.sweep import driver, plan
    from hvdscale.study.verdict import MIN_ROUNDS

    if args.budget is not None and not args.decide:
        raise HvdscaleError("--budget applies to --decide only (add --decide, or drop --budget)")
    spec = plan.plan_sweep(plan.SweepRequest(
        args.config, args.np, args.strategies, launcher=args.launcher, hostfile=args.hostfile,
        out=args.out, overrides=args.set, network_interfaces=args.network_interfaces,
        launcher_args=args.launcher_args, timeout_s=args.timeout, redo=args.redo,
        frameworks=args.frameworks, progress_every=args.progress_every,
        repeats=args.repeats, scale_lr=args.scale_lr, launch_per_point=args.launch_per_point,
        axes=args.axis),
        check_out=not args.dry_run)
    say = functools.partial(print, flush=True)
    if args.dry_run:
        if args.decide:  # the first rounds --decide always runs; the rest depend on the results
            import dataclasses

            spec = dataclasses.replace(spec, repeats=max(spec.repeats, MIN_ROUNDS))
            say(f"--decide: the {MIN_ROUNDS} rounds below, then one round at a time for the "
                "points of the comparisons still undecided, within --budget")
        driver.dry_run(spec, say)
        return 0
    where = f" on {spec.hostfile.describe()}" if spec.hostfile else ""
    fws = f"{args.frameworks} x " if args.frameworks else ""
    rounds = f" x {spec.repeats} interleaved rounds" if spec.repeats > 1 else ""
    if args.decide:
        rounds = (f" x {max(spec.repeats, MIN_ROUNDS)}+ rounds until decided (budget "
                  f"{args.budget or DEFAULT_BUDGET_S:.0f} s)")
    rules = f" x rules {args.scale_lr}" if args.scale_lr else ""
    axes = "".join(f" x {a}" for a in args.axis)
    say(f"hvdscale sweep: {len(spec.points)} points ({args.np} ranks x {fws}"
        f"{args.strategies}{rules}{axes}){rounds} with {spec.launcher}{where} into {spec.out}")
    try:
        if args.decide:
            from hvdscale.study.sweep.until_decided import run_until_decided

            result = run_until_decided(spec, args.budget or DEFAULT_BUDGET_S, say)
        else:
            result = driver.run_sweep(spec, say)
    except KeyboardInterrupt:
        # The running launch and all its processes are already ended (study/sweep/process.py);
        # finished points stay recorded, so rerunning the same command resumes where this
        # stopped. A second Ctrl-C now would only turn this line into a traceback.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("hvdscale sweep: interrupted; rerun the same command to go on", file=sys.stderr)
        return 130
    _say_cost(spec.out, say)
    print(write_report(spec.out, plot=not args.no_plot), end="", flush=True)
    if result.failed:
        say(f"hvdscale sweep: {len(result.failed)} of {len(result.outcomes)} points failed "
            "(see 'Failed points' above and the logs)")
        return 1
    return 0


def _say_cost(out: Path, say: Callable[[str], None]) -> None:
    """The line before the report: what the results directory's launches cost
    (hvdscale.study.sweep.cost)."""
    from hvdscale.study.sweep.cost import sweep_cost
    from hvdscale.study.sweep.launcher import read_out

    cost = sweep_cost(read_out(out), out)
    if cost is not None:
        say(f"hvdscale sweep: what the launches cost: {cost.describe()}")
