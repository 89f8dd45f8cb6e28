"""``hvdscale backtest``: fit on the public scaling tables' small n, predict the rest."""

from __future__ import annotations

import argparse

from hvdscale.commands import common

NAME = "backtest"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The ``backtest`` parser."""
    pr = subparsers.add_parser(
        NAME, help="back-test the fitted prediction on the seed notes' scaling tables",
        description="For each table shipped with hvdscale (hvdscale/study/predict/tables/), or "
        "each in --tables DIR, fit on n <= --fit-max GPUs with the same family choice as "
        "predict --fit and predict the larger n; print predicted vs measured words/s and the "
        "error. Fewer than 3 GPU counts at or below --fit-max cannot choose a family: the "
        "output then says so.")
    pr.add_argument("--fit-max", type=int, default=4, help="fit on n <= this (default 4)")
    pr.add_argument("--tables", default=None, metavar="DIR",
                    help="a directory of tables in the same CSV format, at any distinct GPU "
                    "counts that include 1 (e.g. 1,2,4,8,16 or 1,4,8,16; default: the shipped "
                    "ones)")
    pr.add_argument("--out", default=None, metavar="JSON", help="also write the result as JSON")
    pr.add_argument("--plot", default=None, metavar="PNG",
                    help="write measured, predicted and interval per table")
    common.add_json(pr, "print JSON instead of tables")
    return pr


def handle(args: argparse.Namespace) -> int:
    """Back-test and print the per-table results and the summary."""
    from pathlib import Path

    from hvdscale.errors import HvdscaleError
    from hvdscale.study.plotting import write_atomic
    from hvdscale.study.predict import backtest, dumps

    if args.fit_max < 2:
        raise HvdscaleError(f"--fit-max must be >= 2 (got {args.fit_max})")
    if args.tables and not Path(args.tables).is_dir():
        raise HvdscaleError(f"--tables {args.tables}: no such directory")
    res = backtest.run_backtest(Path(args.tables) if args.tables else None, args.fit_max)
    if args.out:
        write_atomic(Path(args.out), (dumps(res) + "\n").encode())
    if args.plot:
        backtest.plot(res, Path(args.plot))
    print(dumps(res) if args.json else backtest.render(res), end="")
    return 0
