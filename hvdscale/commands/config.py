"""``hvdscale config``: print the resolved config as YAML (no training)."""

from __future__ import annotations

import argparse

from hvdscale.commands import common

NAME = "config"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The ``config`` parser."""
    c = subparsers.add_parser(NAME, help="print the resolved config as YAML (no training)")
    common.add_config(c, help=None)
    common.add_set(c)
    return c


def handle(args: argparse.Namespace) -> int:
    """Load the config with its overrides and print it as YAML."""
    import yaml

    from hvdscale.config import load_config, to_dict

    print(yaml.safe_dump(to_dict(load_config(args.config, args.set)), sort_keys=False), end="")
    return 0
