"""``hvdscale hostfile``: check a 'HOST slots=N' hostfile (and that N ranks fit)."""

from __future__ import annotations

import argparse

NAME = "hostfile"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The ``hostfile`` parser."""
    hf = subparsers.add_parser(NAME,
                               help="check a 'HOST slots=N' hostfile (and that N ranks fit)")
    hf.add_argument("hostfile")
    hf.add_argument("--np", type=int, default=None, help="ranks that must fit in the slots")
    return hf


def handle(args: argparse.Namespace) -> int:
    """Parse the hostfile, check the ranks fit, print one line."""
    from hvdscale.study.sweep.hostfile import parse_hostfile

    hosts = parse_hostfile(args.hostfile)
    if args.np is not None:
        hosts.check_ranks(args.np)
    print(f"{hosts.path}: {len(hosts.hosts)} host(s), {hosts.slots} slots "
          f"({hosts.describe()})")
    return 0
