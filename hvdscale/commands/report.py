"""``hvdscale report``: scaling tables (and plots) from recorded runs."""

from __future__ import annotations

import argparse

from hvdscale.commands import common

NAME = "report"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The ``report`` parser."""
    rep = subparsers.add_parser(NAME, help="scaling tables (and plots) from recorded runs")
    rep.add_argument("results", help="a results directory or results.jsonl file")
    rep.add_argument("--plot", action="store_true", help="write PNG plots beside the tables")
    common.add_out(rep, None, "where report.md, report.csv and plots go "
                   "(default: the results directory)")
    return rep


def handle(args: argparse.Namespace) -> int:
    """Write report.md/report.csv (and plots) and print the tables."""
    from hvdscale.study.report.report import write_report

    print(write_report(args.results, args.out, plot=args.plot), end="")
    return 0
