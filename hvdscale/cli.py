"""``hvdscale`` command line: run, report, and the version of the stack it runs on."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence
from pathlib import Path

import hvdscale
from hvdscale.errors import HvdscaleError


def _version_text() -> str:
    from hvdscale.records.provenance import versions

    v = versions()
    return (f"hvdscale {hvdscale.__version__}\n"
            f"python {v['python']}\n"
            f"torch {v['torch'] or 'not installed'}\n"
            f"tensorflow {v['tensorflow'] or 'not installed'}\n"
            f"horovod {v['horovod'] or 'not installed'}\n"
            f"mpi4py {v['mpi4py'] or 'not installed'}\n"
            f"MPI library: {v['mpi'] or 'not found'}")


class _VersionAction(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kw: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print versions and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kw: object) -> None:
        print(_version_text())
        parser.exit()


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds (got {text!r})")
    return value


def build_parser() -> argparse.ArgumentParser:
    from hvdscale.study.fusion import DEFAULT_CYCLES, DEFAULT_OVERLAPS, DEFAULT_THRESHOLDS

    fusion_defaults = (DEFAULT_THRESHOLDS, DEFAULT_CYCLES, DEFAULT_OVERLAPS)
    p = argparse.ArgumentParser(prog="hvdscale", description=hvdscale.__doc__)
    p.add_argument("--version", action=_VersionAction)
    sub = p.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("run", help="train and measure one configuration on the launched ranks",
                       description="Run under mpirun/horovodrun/srun (or alone as one rank).")
    r.add_argument("config", help="YAML run config")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. strategy.name=independent (repeatable)")
    r.add_argument("--out", default="results", help="results directory (default: results/)")
    r.add_argument("--progress-every", type=_seconds, default=10.0, metavar="S",
                   help="rank 0's progress: a plain line every S seconds when output is a file "
                   "or pipe (default: 10); on a terminal it is one live line")
    r.add_argument("--quiet", action="store_true",
                   help="no progress report; only the final summary line")

    c = sub.add_parser("config", help="print the resolved config as YAML (no training)")
    c.add_argument("config")
    c.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")

    sw = sub.add_parser(
        "sweep", help="run every (ranks, framework, strategy) point as its own launch, then "
        "the report",
        description="Launch each point with mpirun, horovodrun or srun, one progress line per "
        "point; a failed point is recorded as failed and the sweep goes on; points already "
        "recorded (same config and ranks) are skipped unless --redo. Ends with the report.")
    sw.add_argument("config", help="YAML run config")
    sw.add_argument("--np", required=True, metavar="N,N,...",
                    help="rank counts, comma-separated, e.g. 1,2,4")
    sw.add_argument("--strategies", default="horovod,ps,independent", metavar="S,S,...",
                    help="strategies, comma-separated (default: horovod,ps,independent)")
    sw.add_argument("--frameworks", default=None, metavar="F,F,...",
                    help="frameworks, comma-separated: torch, tf (default: the config's)")
    sw.add_argument("--launcher", default="mpirun", metavar="{mpirun,horovodrun,srun}",
                    help="how each point is launched (default: mpirun)")
    sw.add_argument("--hostfile", default=None,
                    help="'HOST slots=N' hostfile for mpirun or horovodrun (validated first)")
    sw.add_argument("--network-interfaces", default=None, metavar="NIC",
                    help="interface(s) the ranks talk over, e.g. eth0 (multi-host)")
    sw.add_argument("--launcher-args", default="", metavar="ARGS",
                    help="extra launcher arguments, one shell-quoted string")
    sw.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a config key for every point (repeatable)")
    sw.add_argument("--out", default="results", help="results directory (default: results/)")
    sw.add_argument("--timeout", type=float, default=900.0, metavar="S",
                    help="time limit of one point in seconds (default: 900)")
    sw.add_argument("--redo", action="store_true",
                    help="measure points again even when already recorded")
    sw.add_argument("--progress-every", type=_seconds, default=None, metavar="S",
                    help="seconds between the progress lines each point writes to its log "
                    "(logs/*.stdout; default: hvdscale run's 10)")
    sw.add_argument("--no-plot", action="store_true", help="report without PNG plots")
    sw.add_argument("--dry-run", action="store_true",
                    help="check the input and print each point's command; launch nothing")

    fu = sub.add_parser(
        "fusion", help="sweep Horovod's fusion threshold x cycle time x overlap mode",
        description="One launch per point, rounds interleaved (--repeats); Horovod's defaults, "
        "fusion off, the autotuner's choice and independent replicas measured alongside. Ends "
        "with a table, a heat-map and the recommended setting with its paired gains. Points "
        "already measured in --out are skipped, so a rerun resumes.")
    fu.add_argument("config", help="YAML run config")
    fu.add_argument("--np", required=True, type=int, metavar="N", help="ranks (>= 2)")
    fu.add_argument("--threshold-mb", default=fusion_defaults[0], metavar="T,T,...",
                    help=f"fusion thresholds in MiB, 0 = off (default: {fusion_defaults[0]})")
    fu.add_argument("--cycle-ms", default=fusion_defaults[1], metavar="C,C,...",
                    help=f"cycle times in ms (default: {fusion_defaults[1]})")
    fu.add_argument("--overlap", default=fusion_defaults[2], metavar="M,M",
                    help=f"overlap modes (default: {fusion_defaults[2]})")
    fu.add_argument("--repeats", type=int, default=3, help="interleaved rounds (default: 3)")
    fu.add_argument("--out", default="results/fusion", help="results directory "
                    "(default: results/fusion)")
    fu.add_argument("--launcher", default="mpirun", metavar="{mpirun,horovodrun,srun}")
    fu.add_argument("--hostfile", default=None, help="'HOST slots=N' hostfile")
    fu.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a config key for every point (repeatable)")
    fu.add_argument("--timeout", type=float, default=900.0, metavar="S",
                    help="time limit of one launch in seconds (default: 900)")
    fu.add_argument("--timeline-steps", type=int, default=3, metavar="K",
                    help="steps of Horovod's timeline captured after each measured window "
                    "(0: none; default: 3)")
    fu.add_argument("--no-autotune", action="store_true",
                    help="skip the HOROVOD_AUTOTUNE run and its point")
    fu.add_argument("--no-independent", action="store_true",
                    help="skip the independent-replicas point")
    fu.add_argument("--no-plot", action="store_true", help="no heat-map")
    fu.add_argument("--dry-run", action="store_true",
                    help="check the input and list the points; launch nothing")

    tl = sub.add_parser("timeline", help="summarise a Horovod timeline or autotune log")
    tl.add_argument("file", help="timeline JSON (HOROVOD_TIMELINE) or autotune CSV "
                    "(HOROVOD_AUTOTUNE_LOG, with --autotune)")
    tl.add_argument("--autotune", action="store_true", help="the file is an autotune log")

    hf = sub.add_parser("hostfile", help="check a 'HOST slots=N' hostfile (and that N ranks fit)")
    hf.add_argument("hostfile")
    hf.add_argument("--np", type=int, default=None, help="ranks that must fit in the slots")

    g = sub.add_parser(
        "gemm", help="GFLOP/s of an RNN layer's NN, TN and NT GEMMs across batch sizes",
        description="Times the forward (NN), backward (TN) and weight-gradient (NT) products of "
        "an RNN layer, M=gates x hidden, K=hidden, N=batch, each also with its transposed "
        "operand pre-transposed; GFLOP/s and the fraction of a square GEMM's peak measured in "
        "the same run. Prints the tables, writes gemm.md, gemm_<framework>.png and a record.")
    g.add_argument("--framework", default="torch", metavar="torch,tf",
                   help="framework(s), comma-separated (default: torch)")
    g.add_argument("--hidden", default=None, metavar="H,H,...",
                   help="hidden sizes (default: 512,1024; the notes: 512,1024,1536,2048,2560)")
    g.add_argument("--batch", default=None, metavar="B,B,...",
                   help="batch sizes (default: 1..256, every multiple of 32 with neighbours)")
    g.add_argument("--threads", type=int, default=1, help="compute threads (default: 1)")
    g.add_argument("--gates", type=int, default=4,
                   help="gates per layer: M = gates x hidden (4: LSTM, default; 1: plain RNN)")
    g.add_argument("--repeats", type=int, default=5, help="timed repeats (median; default 5)")
    g.add_argument("--warmup", type=int, default=2, help="warm-up calls per layout (default 2)")
    g.add_argument("--min-time", type=float, default=0.02, metavar="S",
                   help="seconds one timed repeat lasts at least (default 0.02)")
    g.add_argument("--peak-size", type=int, default=2048,
                   help="size of the square GEMM that measures the peak (default 2048)")
    g.add_argument("--clock", default="auto", metavar="{auto,wall,cpu}",
                   help="auto (default): the process's CPU time with one thread (robust on a "
                   "shared machine), wall time with more")
    g.add_argument("--out", default="results", help="results directory (default: results/)")
    g.add_argument("--json", action="store_true", help="print the record as JSON instead")
    g.add_argument("--no-plot", action="store_true", help="no PNG plot")

    pf = sub.add_parser(
        "profile", help="operators and kernels of one training step, fused vs loop RNN",
        description="Builds the config's model with rnn_impl fused and loop in this process "
        "(no MPI), profiles a few training steps after a warm-up, and prints the seed notes' "
        "operator and kernel tables for this machine with the ratio loop/fused, and the time "
        "split between RNN, softmax projection and the rest. Writes profile.md and a record.")
    pf.add_argument("config", help="YAML run config")
    pf.add_argument("--steps", type=int, default=2, help="profiled steps (default: 2)")
    pf.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a config key, e.g. data.batch_size=16 (repeatable)")
    pf.add_argument("--out", default="results", help="results directory (default: results/)")
    pf.add_argument("--json", action="store_true", help="print the record as JSON instead")

    bs = sub.add_parser(
        "batch", help="words/s at np=1 across per-rank batch sizes, beside the GEMM curve",
        description="Runs the config on one rank (strategy independent) at each per-rank "
        "batch size, one launch per point as 'hvdscale sweep' does, then times the RNN "
        "layer's GEMMs at the config's hidden size and those batch sizes. Prints the table, "
        "writes batch.md, a plot and a record.")
    bs.add_argument("config", help="YAML run config")
    bs.add_argument("--batch", required=True, metavar="B,B,...",
                    help="per-rank batch sizes, e.g. 8,16,32,64")
    bs.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a config key for every point (repeatable)")
    bs.add_argument("--launcher", default="mpirun", metavar="{mpirun,horovodrun,srun}")
    bs.add_argument("--out", default="results", help="results directory (default: results/)")
    bs.add_argument("--timeout", type=float, default=900.0, metavar="S",
                    help="time limit of one point in seconds (default: 900)")
    bs.add_argument("--redo", action="store_true", help="measure recorded points again")
    bs.add_argument("--json", action="store_true", help="print the record as JSON instead")
    cb = sub.add_parser(
        "commbench", help="allreduce / parameter-server time and bandwidth by message size",
        description="Launches itself (mpirun, and horovodrun --gloo for horovod-gloo) and "
        "writes DIR/commbench.json, commbench.md and commbench.png.")
    cb.add_argument("--np", type=int, required=True, help="ranks")
    cb.add_argument("--sizes", default="4B..256MB",
                    help="4B..256MB (doubling; ..256MB:x4 for x4 steps) or 1MB,16MB "
                    "(binary units; default 4B..256MB)")
    cb.add_argument("--transports", default="horovod-mpi,horovod-gloo,mpi4py,ps",
                    help="comma-separated subset of horovod-mpi,horovod-gloo,mpi4py,ps")
    cb.add_argument("--repeats", type=int, default=20,
                    help="timed repeats per size (fewer above 4 MB, at least 5; default 20)")
    cb.add_argument("--warmup", type=int, default=2, help="untimed repeats first (default 2)")
    cb.add_argument("--ps-servers", type=int, default=1, help="parameter servers (default 1)")
    cb.add_argument("--ps-placement", default="colocated", help="colocated or dedicated")
    cb.add_argument("--hostfile", default=None, help="'HOST slots=N' hostfile")
    cb.add_argument("--timeout", type=float, default=600.0, help="limit per job in s")
    cb.add_argument("--out", default="commbench", help="output directory (default commbench/)")
    cb.add_argument("--no-plot", action="store_true", help="no PNG")

    pr = sub.add_parser(
        "predict", help="predict step time, words/s and efficiency per strategy and rank count",
        description="From the model's gradient bytes, the compute time (records or a given "
        "rate) and the network (commbench or latency/bandwidth). See hvdscale/study/predict.py.")
    pr.add_argument("config", help="YAML run config")
    pr.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    pr.add_argument("--ranks", default="1,2,4,...,512", help="e.g. 1,2,4,...,512 (default)")
    pr.add_argument("--comm", default=None, metavar="DIR", help="a commbench output directory")
    pr.add_argument("--transport", default="", help="commbench allreduce transport to use "
                    "(default horovod-mpi, else horovod-gloo, else mpi4py)")
    pr.add_argument("--latency", default=None, help="per-message latency, e.g. 5us")
    pr.add_argument("--bandwidth", default=None, help="link bandwidth, e.g. 25Gbit")
    pr.add_argument("--mem-bandwidth", default=None,
                    help="server memory bandwidth for the PS update, e.g. 10GB/s (with "
                    "--latency/--bandwidth; commbench measures it)")
    pr.add_argument("--records", default=None, metavar="RESULTS",
                    help="results directory: compute time from its 1-rank runs, and "
                    "predicted vs measured for every recorded point")
    pr.add_argument("--single-rate", type=float, default=None, metavar="WORDS_PER_S",
                    help="compute time from one device's words/s instead of records")
    pr.add_argument("--compute-ms", type=float, default=None,
                    help="compute time per step at the config's batch instead of records")
    pr.add_argument("--scaling", default="weak,strong", help="weak, strong or weak,strong")
    pr.add_argument("--backward-fraction", type=float, default=2 / 3,
                    help="share of compute in backward, for overlap (default 0.67)")
    pr.add_argument("--servers", type=int, default=None,
                    help="dedicated PS servers (default strategy.ps.num_servers)")
    pr.add_argument("--plot", default=None, metavar="PNG", help="write the efficiency plot")
    pr.add_argument("--json", action="store_true", help="print JSON instead of tables")

    rep = sub.add_parser("report", help="scaling tables (and plots) from recorded runs")
    rep.add_argument("results", help="a results directory or results.jsonl file")
    rep.add_argument("--plot", action="store_true", help="write PNG plots beside the tables")
    rep.add_argument("--out", default=None, help="where report.md, report.csv and plots go "
                     "(default: the results directory)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``hvdscale`` console script."""
    args = build_parser().parse_args(argv)
    if args.cmd == "run":
        return _cmd_run(args)
    try:
        if args.cmd == "config":
            import yaml

            from hvdscale.config import load_config, to_dict

            print(yaml.safe_dump(to_dict(load_config(args.config, args.set)), sort_keys=False),
                  end="")
            return 0
        if args.cmd == "sweep":
            return _cmd_sweep(args)
        if args.cmd == "fusion":
            return _cmd_fusion(args)
        if args.cmd == "timeline":
            import json

            from hvdscale.records.timeline import read_autotune_log, summarize_timeline

            res = (read_autotune_log(args.file) if args.autotune
                   else summarize_timeline(args.file))
            print(json.dumps(res, indent=1))
            return 0
        if args.cmd == "hostfile":
            from hvdscale.study.hostfile import parse_hostfile

            hosts = parse_hostfile(args.hostfile)
            if args.np is not None:
                hosts.check_ranks(args.np)
            print(f"{hosts.path}: {len(hosts.hosts)} host(s), {hosts.slots} slots "
                  f"({hosts.describe()})")
            return 0
        if args.cmd == "gemm":
            return _cmd_gemm(args)
        if args.cmd == "profile":
            return _cmd_profile(args)
        if args.cmd == "batch":
            return _cmd_batch(args)
        if args.cmd == "commbench":
            from hvdscale.study.commbench import run_commbench, table

            res = run_commbench(args.np, args.sizes, args.transports, args.out, args.repeats,
                                args.warmup, args.ps_servers, args.ps_placement, args.hostfile,
                                args.timeout, plot=not args.no_plot)
            print(table(res), end="")
            return 0
        if args.cmd == "predict":
            from hvdscale.study import predict

            res = predict.run_predict(
                args.config, args.set, args.ranks, args.comm, args.latency, args.bandwidth,
                args.mem_bandwidth, args.records, args.single_rate, args.compute_ms,
                args.scaling, args.backward_fraction, args.servers, args.transport, args.plot)
            print(predict.dumps(res) if args.json else predict.render(res), end="")
            return 0
        if args.cmd == "report":
            from hvdscale.study.report import write_report

            print(write_report(args.results, args.out, plot=args.plot), end="")
            return 0
    except HvdscaleError as e:
        print(f"hvdscale: error: {e}", file=sys.stderr)
        return 2
    return 1  # pragma: no cover - argparse rejects other commands


def _cmd_run(args: argparse.Namespace) -> int:
    from hvdscale.core.progress import ProgressSettings, start_progress
    from hvdscale.core.supervise import abort_job, report_and_abort
    from hvdscale.core.world import launch_rank

    rank = launch_rank()
    progress = start_progress(ProgressSettings(args.progress_every, args.quiet), rank)
    try:
        from hvdscale.config import load_config

        cfg = load_config(args.config, args.set)
        from hvdscale.train import runner

        record = runner.run(cfg, args.out, argv=sys.argv, progress=progress)
        progress.close()  # the summary line takes the live line's place
        if record is not None:
            print(_one_line(record), flush=True)
        return 0
    except BaseException as e:
        progress.close()
        if isinstance(e, SystemExit) and not e.code:
            return 0
        if isinstance(e, KeyboardInterrupt):
            # Ctrl-C is the user's own doing: say so (progress said which step), no traceback.
            print(f"hvdscale: rank {rank} interrupted", file=sys.stderr, flush=True)
            abort_job(130)
        report_and_abort(e, rank)
        return 1


def _cmd_sweep(args: argparse.Namespace) -> int:
    """Plan (all input checked, nothing launched), run the points, write and print the report.

    Returns 0 when every point is recorded ok, 1 when some point failed (after the report).
    """
    from hvdscale.study import sweep
    from hvdscale.study.report import write_report

    spec = sweep.plan_sweep(args.config, args.np, args.strategies, launcher=args.launcher,
                            hostfile=args.hostfile, out=args.out, overrides=args.set,
                            network_interfaces=args.network_interfaces,
                            launcher_args=args.launcher_args, timeout_s=args.timeout,
                            redo=args.redo, check_out=not args.dry_run,
                            frameworks=args.frameworks,
                            progress_every=args.progress_every)
    say = functools.partial(print, flush=True)
    if args.dry_run:
        sweep.dry_run(spec, say)
        return 0
    where = f" on {spec.hostfile.describe()}" if spec.hostfile else ""
    fws = f"{args.frameworks} x " if args.frameworks else ""
    say(f"hvdscale sweep: {len(spec.points)} points ({args.np} ranks x {fws}"
        f"{args.strategies}) with {spec.launcher}{where} into {spec.out}")
    try:
        result = sweep.run_sweep(spec, say)
    except KeyboardInterrupt:
        # The running point's launcher and ranks are already ended (run_point); finished
        # points stay recorded, so rerunning the same command resumes where this stopped.
        print("hvdscale sweep: interrupted; rerun the same command to go on", file=sys.stderr)
        return 130
    print(write_report(spec.out, plot=not args.no_plot), end="", flush=True)
    if result.failed:
        say(f"hvdscale sweep: {len(result.failed)} of {len(result.outcomes)} points failed "
            "(see 'Failed points' above and the logs)")
        return 1
    return 0


def _cmd_gemm(args: argparse.Namespace) -> int:
    """Check the input, measure, write the record, gemm.md and the plot; print the tables."""
    import json
    from pathlib import Path

    from hvdscale.records.store import append_record, check_writable
    from hvdscale.study import gemm

    frameworks = gemm.parse_frameworks(args.framework)
    hidden = gemm.parse_sizes(args.hidden or gemm.DEFAULT_HIDDEN, "--hidden")
    batch = gemm.parse_sizes(args.batch or gemm.DEFAULT_BATCH, "--batch")
    if not args.min_time > 0:
        raise HvdscaleError(f"--min-time must be > 0 seconds (got {args.min_time})")
    out = check_writable(args.out)
    say = None if args.json else functools.partial(print, file=sys.stderr, flush=True)
    rec = gemm.run_gemm(frameworks, hidden, batch, threads=args.threads, gates=args.gates,
                        repeats=args.repeats, warmup=args.warmup, min_time_s=args.min_time,
                        peak_size=args.peak_size, say=say, clock=args.clock)
    md = gemm.markdown(rec)
    if not args.no_plot:
        rec["plots"] = [str(p) for p in gemm.plot(rec, Path(out))]
        md += "\nPlots: " + ", ".join(rec["plots"]) + "\n"
    append_record(out, rec)
    (Path(out) / "gemm.md").write_text(md)
    print(json.dumps(rec, indent=1) if args.json else md, flush=True)
    return 0


def _cmd_profile(args: argparse.Namespace) -> int:
    """Profile fused and loop, write the record and profile.md; print the tables."""
    import json
    from pathlib import Path

    from hvdscale.records.store import append_record, check_writable
    from hvdscale.study import profile

    if args.steps < 1:
        raise HvdscaleError(f"--steps must be >= 1 (got {args.steps})")
    out = check_writable(args.out)
    say = None if args.json else functools.partial(print, file=sys.stderr, flush=True)
    rec = profile.run_profile(args.config, args.set, args.steps, say=say)
    md = profile.markdown(rec)
    append_record(out, rec)
    (Path(out) / "profile.md").write_text(md)
    print(json.dumps(rec, indent=1) if args.json else md, flush=True)
    return 0


def _cmd_batch(args: argparse.Namespace) -> int:
    """np=1 at each per-rank batch size, then the GEMMs; record, batch.md, plot, table."""
    import json
    from pathlib import Path

    from hvdscale.records.store import append_record
    from hvdscale.study import batch as batchsize
    from hvdscale.study.gemm import parse_sizes

    batches = parse_sizes(args.batch, "--batch")
    say = functools.partial(print, file=sys.stderr if args.json else sys.stdout, flush=True)
    rec = batchsize.run_batch_sweep(args.config, batches, args.set, out=args.out,
                                    launcher=args.launcher, timeout_s=args.timeout,
                                    redo=args.redo, say=say)
    out = Path(args.out)
    rec["plot"] = str(batchsize.plot(rec, out))
    append_record(out, rec)
    md = batchsize.markdown(rec)
    (out / "batch.md").write_text(md)
    print(json.dumps(rec, indent=1) if args.json else md, flush=True)
    return 0 if all(p["status"] == "ok" for p in rec["points"]) else 1


def _cmd_fusion(args: argparse.Namespace) -> int:
    """Plan (all input checked), run or resume the fusion sweep, print table and advice."""
    from hvdscale.study import fusion

    spec = fusion.plan_fusion(args.config, args.np, args.threshold_mb, args.cycle_ms,
                              args.overlap, args.repeats, args.out, args.set, args.launcher,
                              args.hostfile, args.timeout, args.timeline_steps,
                              autotune=not args.no_autotune,
                              independent=not args.no_independent,
                              check_out=not args.dry_run)
    say = functools.partial(print, flush=True)
    pts = fusion.points(spec)
    if args.dry_run:
        if spec.autotune:
            say(f"[autotune] {fusion.autotune_point(spec).label}")
        for s, p in pts:
            say(f"[{p.index}/{len(pts)}] {s.label}: hvdscale run ... "
                + " ".join(f"--set {x}" for x in p.sets))
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
    print(fusion.write_outputs(res, spec.sweep.out, title, plot=not args.no_plot), end="",
          flush=True)
    failed = [r for r in res["table"] if r["repeats"] < spec.repeats]
    if failed:
        say(f"hvdscale fusion: {len(failed)} points lack rounds (failed launches; see "
            f"{spec.sweep.out / 'logs'})")
        return 1
    return 0


def _one_line(rec: dict) -> str:
    k = rec["key"]
    return (f"hvdscale: {k['model']}/{rec['config']['framework']}/{k['rnn_impl']}/{k['strategy']} "
            f"ranks={rec['ranks']} words/s={rec['words_per_s']:.1f} "
            f"step={rec['step_time']['median'] * 1e3:.1f}ms "
            f"(+-{rec['step_time']['jitter'] * 1e3:.1f}) loss={rec['final_loss']:.4f}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
