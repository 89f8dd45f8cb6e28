"""``hvdscale gemm``: GFLOP/s of an RNN layer's NN, TN and NT GEMMs across batch sizes."""

from __future__ import annotations

import argparse
import functools
import sys

from hvdscale.commands import common
from hvdscale.errors import HvdscaleError

NAME = "gemm"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The ``gemm`` parser."""
    g = subparsers.add_parser(
        NAME, help="GFLOP/s of an RNN layer's NN, TN and NT GEMMs across batch sizes",
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
    g.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                   help="where the products run (cuda: PyTorch only; the clock is then wall "
                   "time around a device synchronisation)")
    g.add_argument("--precision", default="fp32", metavar="fp32,tf32,bf16",
                   help="precision(s), comma-separated, each timed in turn (default fp32; tf32 "
                   "on GPUs only)")
    common.add_out(g)
    common.add_json(g)
    common.add_no_plot(g, "no PNG plot")
    return g


def handle(args: argparse.Namespace) -> int:
    """Check the input, measure, write the record, gemm.md and the plot; print the tables."""
    import json
    from pathlib import Path

    from hvdscale.records.store import append_record, check_writable
    from hvdscale.study.stepcost import gemm, gemm_report

    frameworks = gemm.parse_frameworks(args.framework)
    hidden = gemm.parse_sizes(args.hidden or gemm.DEFAULT_HIDDEN, "--hidden")
    batch = gemm.parse_sizes(args.batch or gemm.DEFAULT_BATCH, "--batch")
    if not args.min_time > 0:
        raise HvdscaleError(f"--min-time must be > 0 seconds (got {args.min_time})")
    out = check_writable(args.out)
    say = None if args.json else functools.partial(print, file=sys.stderr, flush=True)
    spec = gemm.GemmSpec(hidden, batch, threads=args.threads, gates=args.gates,
                         repeats=args.repeats, warmup=args.warmup, min_time_s=args.min_time,
                         peak_size=args.peak_size, clock=args.clock, device=args.device,
                         precisions=tuple(gemm.parse_precisions(args.precision)))
    rec = gemm.run_gemm(frameworks, spec, say=say)
    md = gemm_report.markdown(rec)
    if not args.no_plot:
        rec.plots = [str(p) for p in gemm_report.plot(rec, Path(out))]
        md += "\nPlots: " + ", ".join(rec.plots) + "\n"
    append_record(out, rec)
    (Path(out) / "gemm.md").write_text(md)
    print(json.dumps(rec.to_dict(), indent=1) if args.json else md, flush=True)
    return 0
