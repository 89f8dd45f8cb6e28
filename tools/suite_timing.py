"""Where a test phase's time goes, from its junit file; two files side by side.

    python tools/suite_timing.py reports/single.xml                 # modules, slowest tests
    python tools/suite_timing.py BEFORE.xml AFTER.xml --tests 25    # and what changed

A test's time is its junit ``time`` (setup, call and teardown together, so a module fixture's
build is charged to the first test that uses it). Prints the phase's total, each module's
seconds and test count (slowest first) and the slowest tests; with two files, each beside the
other and the difference.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path


def test_seconds(junit: Path) -> dict[str, float]:
    """``module::test`` -> seconds, for every test case in ``junit``."""
    out: dict[str, float] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").rsplit(".", 1)[-1]
        name = str(case.get("name")).split("@", 1)[0]  # xdist's "@GROUP" suffix
        out[f"{module}::{name}"] = float(case.get("time") or 0.0)
    return out


def by_module(tests: dict[str, float]) -> tuple[Counter, Counter]:
    """Seconds and test counts per module."""
    secs: Counter = Counter()
    count: Counter = Counter()
    for name, s in tests.items():
        module = name.split("::")[0]
        secs[module] += s
        count[module] += 1
    return secs, count


def table(runs: list[dict[str, float]], modules: int, tests: int) -> str:
    """The printout for one junit file or two (before, after)."""
    lines = ["total: " + " -> ".join(f"{sum(r.values()):.0f} s in {len(r)} tests" for r in runs)]
    mods = [by_module(r) for r in runs]
    order = sorted(set().union(*(m[0] for m in mods)), key=lambda k: -max(m[0][k] for m in mods))
    lines.append("\nmodule | " + " | ".join(["s (tests)"] * len(runs)) + (" | change" if
                                                                            len(runs) > 1 else ""))
    for k in order[:modules]:
        cells = [f"{m[0][k]:.1f} ({m[1][k]})" for m in mods]
        delta = [f"{mods[-1][0][k] - mods[0][0][k]:+.1f}"] if len(runs) > 1 else []
        lines.append(" | ".join([k, *cells, *delta]))
    names = sorted(set().union(*runs), key=lambda k: -max(r.get(k, 0.0) for r in runs))
    lines.append("\ntest | " + " | ".join(["s"] * len(runs)))
    for k in names[:tests]:
        lines.append(" | ".join([k, *(f"{r[k]:.1f}" if k in r else "-" for r in runs)]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the table; exit 2 on a missing or unreadable file."""
    ap = argparse.ArgumentParser(prog="tools/suite_timing.py", description=__doc__.split("\n")[0])
    ap.add_argument("junit", nargs="+", type=Path, help="one junit file, or BEFORE AFTER")
    ap.add_argument("--modules", type=int, default=20, help="modules shown (default 20)")
    ap.add_argument("--tests", type=int, default=20, help="slowest tests shown (default 20)")
    args = ap.parse_args(argv)
    if len(args.junit) > 2:
        ap.error("give one junit file, or two (before, after)")
    try:
        runs = [test_seconds(p) for p in args.junit]
    except (OSError, ET.ParseError) as e:
        ap.error(f"cannot read a junit file: {e}")
    print(table(runs, args.modules, args.tests))
    return 0


if __name__ == "__main__":
    sys.exit(main())
