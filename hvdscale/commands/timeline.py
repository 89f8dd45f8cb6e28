"""``hvdscale timeline``: summarise a Horovod timeline or autotune log."""

from __future__ import annotations

import argparse

NAME = "timeline"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The ``timeline`` parser."""
    tl = subparsers.add_parser(NAME, help="summarise a Horovod timeline or autotune log")
    tl.add_argument("file", help="timeline JSON (HOROVOD_TIMELINE) or autotune CSV "
                    "(HOROVOD_AUTOTUNE_LOG, with --autotune)")
    tl.add_argument("--autotune", action="store_true", help="the file is an autotune log")
    return tl


def handle(args: argparse.Namespace) -> int:
    """Print the summary as JSON."""
    import json

    from hvdscale.records.autotune_log import read_autotune_log
    from hvdscale.records.timeline import summarize_timeline

    res = read_autotune_log(args.file) if args.autotune else summarize_timeline(args.file)
    print(json.dumps(res, indent=1))
    return 0
