"""``hvdscale batch``: words/s at np=1 across per-rank batch sizes, beside the GEMM curve."""

from __future__ import annotations

import argparse
import functools
import sys

from hvdscale.commands import common

NAME = "batch"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The ``batch`` parser."""
    bs = subparsers.add_parser(
        NAME, help="words/s at np=1 across per-rank batch sizes, beside the GEMM curve",
        description="Runs the config on one rank (strategy independent) at each per-rank "
        "batch size, one launch per point as 'hvdscale sweep' does, then times the RNN "
        "layer's GEMMs at the config's hidden size and those batch sizes. Prints the table, "
        "writes batch.md, a plot and a record.")
    common.add_config(bs)
    bs.add_argument("--batch", required=True, metavar="B,B,...",
                    help="per-rank batch sizes, e.g. 8,16,32,64")
    common.add_set(bs, common.FOR_EVERY_POINT)
    common.add_launcher(bs)
    common.add_out(bs)
    common.add_timeout(bs)
    bs.add_argument("--redo", action="store_true", help="measure recorded points again")
    common.add_json(bs)
    return bs


def handle(args: argparse.Namespace) -> int:
    """np=1 at each per-rank batch size, then the GEMMs; record, batch.md, plot, table."""
    import json
    from pathlib import Path

    from hvdscale.records.store import append_record
    from hvdscale.study.stepcost import batch as batchsize
    from hvdscale.study.stepcost.gemm import parse_sizes

    batches = parse_sizes(args.batch, "--batch")
    say = functools.partial(print, file=sys.stderr if args.json else sys.stdout, flush=True)
    rec = batchsize.run_batch_sweep(args.config, batches, args.set, out=args.out,
                                    launcher=args.launcher, timeout_s=args.timeout,
                                    redo=args.redo, say=say)
    out = Path(args.out)
    rec.plot = str(batchsize.plot(rec, out))
    append_record(out, rec)
    md = batchsize.markdown(rec)
    (out / "batch.md").write_text(md)
    print(json.dumps(rec.to_dict(), indent=1) if args.json else md, flush=True)
    return 0 if all(p["status"] == "ok" for p in rec.points) else 1
