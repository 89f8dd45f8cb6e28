"""``hvdscale profile``: operators and kernels of one training step, fused vs loop RNN."""

from __future__ import annotations

import argparse
import functools
import sys

from hvdscale.commands import common
from hvdscale.errors import HvdscaleError

NAME = "profile"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The ``profile`` parser."""
    pf = subparsers.add_parser(
        NAME, help="operators and kernels of one training step, fused vs loop RNN",
        description="Builds the config's model with rnn_impl fused and loop in this process "
        "(no MPI), profiles a few training steps after a warm-up, and prints the seed notes' "
        "operator and kernel tables for this machine with the ratio loop/fused, and the time "
        "split between RNN, softmax projection and the rest. Writes profile.md and a record.")
    common.add_config(pf)
    pf.add_argument("--steps", type=int, default=2, help="profiled steps (default: 2)")
    common.add_set(pf, "override a config key, e.g. data.batch_size=16 (repeatable)")
    common.add_out(pf)
    common.add_json(pf)
    return pf


def handle(args: argparse.Namespace) -> int:
    """Profile fused and loop, write the record and profile.md; print the tables."""
    import json
    from pathlib import Path

    from hvdscale.records.store import append_record, check_writable
    from hvdscale.study.stepcost import profile

    if args.steps < 1:
        raise HvdscaleError(f"--steps must be >= 1 (got {args.steps})")
    out = check_writable(args.out)
    say = None if args.json else functools.partial(print, file=sys.stderr, flush=True)
    rec = profile.run_profile(args.config, args.set, args.steps, say=say)
    md = profile.markdown(rec)
    append_record(out, rec)
    (Path(out) / "profile.md").write_text(md)
    print(json.dumps(rec.to_dict(), indent=1) if args.json else md, flush=True)
    return 0
