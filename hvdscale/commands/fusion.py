"""``hvdscale fusion``: sweep Horovod's fusion threshold x cycle time x overlap mode."""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

from hvdscale.commands import common

NAME = "fusion"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The ``fusion`` parser."""
    from hvdscale.study.fusion.horovod import DEFAULT_CYCLES, DEFAULT_OVERLAPS, DEFAULT_THRESHOLDS

    fu = subparsers.add_parser(
        NAME, help="sweep Horovod's fusion threshold x cycle time x overlap mode",
        description="One launch per point, rounds interleaved (--repeats); Horovod's defaults, "
        "fusion off, the autotuner's choice and independent replicas measured alongside. Ends "
        "with a table, a heat-map and the recommended setting with its paired gains. Points "
        "already measured in --out are skipped, so a rerun resumes.")
    common.add_config(fu)
    fu.add_argument("--np", required=True, type=int, metavar="N", help="ranks (>= 2)")
    fu.add_argument("--threshold-mb", default=DEFAULT_THRESHOLDS, metavar="T,T,...",
                    help=f"fusion thresholds in MiB, 0 = off (default: {DEFAULT_THRESHOLDS})")
    fu.add_argument("--cycle-ms", default=DEFAULT_CYCLES, metavar="C,C,...",
                    help=f"cycle times in ms (default: {DEFAULT_CYCLES})")
    fu.add_argument("--overlap", default=DEFAULT_OVERLAPS, metavar="M,M",
                    help=f"overlap modes (default: {DEFAULT_OVERLAPS})")
    fu.add_argument("--repeats", type=int, default=3, help="interleaved rounds (default: 3)")
    fu.add_argument("--strategy", choices=("horovod", "ddp"), default="horovod",
                    help="horovod: fusion x cycle x overlap; ddp: PyTorch DDP's bucket_cap_mb "
                    "(its fusion), the same paired recommendation (default: horovod)")
    fu.add_argument("--bucket-cap-mb", default="1,5,25,100", metavar="B,B,...",
                    help="with --strategy ddp: bucket sizes in MiB (default: 1,5,25,100)")
    common.add_out(fu, "results/fusion", "results directory (default: results/fusion)")
    common.add_launcher(fu)
    common.add_hostfile(fu)
    common.add_set(fu, common.FOR_EVERY_POINT)
    common.add_timeout(fu, help="time limit of one launch in seconds (default: 900)")
    fu.add_argument("--timeline-steps", type=int, default=3, metavar="K",
                    help="steps of Horovod's timeline captured after each measured window "
                    "(0: none; default: 3)")
    fu.add_argument("--no-autotune", action="store_true",
                    help="skip the HOROVOD_AUTOTUNE run and its point")
    fu.add_argument("--no-independent", action="store_true",
                    help="skip the independent-replicas point")
    common.add_no_plot(fu, "no heat-map")
    fu.add_argument("--dry-run", action="store_true",
                    help="check the input and list the points; launch nothing")
    return fu


def handle(args: argparse.Namespace) -> int:
    """Plan (all input checked), run or resume the fusion sweep, print table and advice."""
    from hvdscale.study.fusion import horovod as fusion
    from hvdscale.study.fusion import report as fusion_report

    if args.strategy == "ddp":
        return _handle_ddp(args)
    grid = fusion.FusionGrid(args.np, args.threshold_mb, args.cycle_ms, args.overlap,
                             args.repeats, args.timeline_steps, autotune=not args.no_autotune,
                             independent=not args.no_independent)
    spec = fusion.plan_fusion(args.config, grid, args.out, args.set, args.launcher,
                              args.hostfile, args.timeout, check_out=not args.dry_run)
    say = functools.partial(print, flush=True)
    pts = fusion.points(spec)
    if args.dry_run:
        from hvdscale.study.sweep.driver import dry_run

        if spec.autotune:
            say(f"[autotune] {fusion.autotune_point(spec).label}: a launch of its own first")
        dry_run(fusion.grid_sweep(spec, pts), say)
        return 0
    say(f"hvdscale fusion: {len(pts)} points x {spec.repeats} rounds"
        f"{' + 1 autotune run' if spec.autotune else ''} at np={spec.np} with "
        f"{spec.sweep.launcher} into {spec.sweep.out}")
    try:
        res = fusion.run_fusion(spec, say)
    except KeyboardInterrupt:
        print("hvdscale fusion: interrupted; rerun the same command to go on", file=sys.stderr)
        return 130
    title = f"Fusion sweep: {Path(args.config).name} at np={spec.np}"
    print(fusion_report.write_outputs(res, spec.sweep.out, title, plot=not args.no_plot), end="",
          flush=True)
    failed = [r for r in res["table"] if r["repeats"] < spec.repeats]
    if failed:
        say(f"hvdscale fusion: {len(failed)} points lack rounds (failed launches; see "
            f"{spec.sweep.out / 'logs'})")
        return 1
    return 0


def _handle_ddp(args: argparse.Namespace) -> int:
    """``--strategy ddp``: the bucket-size sweep (``hvdscale.study.fusion.ddp``)."""
    from hvdscale.study.fusion import ddp as fusion_ddp
    from hvdscale.study.sweep.plan import SweepRequest

    req = SweepRequest(args.config, [args.np], ["ddp"], launcher=args.launcher,
                       hostfile=args.hostfile, out=args.out, overrides=args.set,
                       timeout_s=args.timeout)
    spec = fusion_ddp.plan_buckets(args.config, args.np, args.bucket_cap_mb, args.repeats, req,
                                   independent=not args.no_independent)
    say = functools.partial(print, flush=True)
    if args.dry_run:
        from hvdscale.study.sweep.driver import dry_run

        dry_run(fusion_ddp.grid_sweep(spec, fusion_ddp.points(spec)), say)
        return 0
    res = fusion_ddp.run_buckets(spec, say)
    title = f"DDP bucket sweep: {Path(args.config).name} at np={spec.np}"
    print(fusion_ddp.write_outputs(res, spec.sweep.out, title), end="", flush=True)
    return 1 if any(r["repeats"] < spec.repeats for r in res["table"]) else 0
