"""The report's start-up table: per point, the seconds from the ranks' process start to their
first step, by phase (the record's ``startup``, ``hvdscale.records.startup``), and the sweep's
own time between points (``<results>/sweep_timing.jsonl``, ``hvdscale.study.sweep.timing``).

A slow launch names its phase here: each cell is the slowest rank's seconds in that phase
(median over the point's runs), and the last column the phase that cost most.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

from hvdscale.records.fields import Record
from hvdscale.records.launch import TIMING_FILE
from hvdscale.records.run import RunRecord
from hvdscale.records.startup import LABELS, Startup

_SHORT = {"imports": "imports", "mpi": "MPI", "horovod": "Horovod", "side_channel": "side ch.",
          "process_group": "strategy", "data": "data", "model": "model",
          "first_step": "1st step"}


def _point(rec: RunRecord) -> tuple[str, int]:
    key = rec.key
    label = f"{rec.name} {key.get('series', key.get('strategy', '?'))}"
    return label, rec.ranks


def startup_table(records: Sequence[Record]) -> str:
    """Markdown rows of each point's start-up phases ('' when no record has ``startup``)."""
    groups: dict[tuple[str, int], list[Startup]] = {}
    for rec in records:
        if isinstance(rec, RunRecord) and rec.startup is not None:
            groups.setdefault(_point(rec), []).append(rec.startup)
    if not groups:
        return ""
    phases = list(LABELS)
    head = ["point", "ranks", "runs", "total", *(_SHORT[p] for p in phases), "slowest phase"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (label, ranks), runs in sorted(groups.items()):
        med = {p: statistics.median(s.max_s.get(p, 0.0) for s in runs) for p in phases}
        total = statistics.median(s.total_max_s for s in runs)
        worst = max(phases, key=lambda p: med[p])
        cells = [label, str(ranks), str(len(runs)), f"{total:.2f}",
                 *(f"{med[p]:.2f}" for p in phases), f"{LABELS[worst]} ({med[worst]:.2f} s)"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def sweep_line(results: str | Path) -> str:
    """One line on the sweep's own time between points ('' without its timing file)."""
    from hvdscale.study.sweep.cost import launch_seconds, timing_rows

    rows = timing_rows(results)
    # the first launch has no point before it; a shared launch's points have no sweep between
    between = [r.between_s for r in rows[1:] if r.between_s is not None]
    starts = [r.launcher_start_s for r in rows if r.launcher_start_s is not None]
    if not between and not starts:
        return ""
    parts = []
    if between:
        parts.append(f"the sweep's own time between points median {statistics.median(between):.2f}"
                     f" s (max {max(between):.2f}; load sample, command, records read)")
    if starts:
        parts.append(f"launcher spawn to first rank's process start median "
                     f"{statistics.median(starts):.2f} s")
    # A shared launch writes a line per point: count launches, not lines.
    return (f"Over {launch_seconds(rows)[0]} launch(es): " + "; ".join(parts)
            + f" ({TIMING_FILE}).\n")


def startup_section(records: Sequence[Record], results: str | Path) -> str:
    """The report's start-up section ('' when there is nothing to show)."""
    from hvdscale.study.sweep.cost import sweep_cost

    table = startup_table(records)
    sweep = sweep_line(results) if Path(results).is_dir() else ""
    cost = sweep_cost(records, results) if Path(results).is_dir() else None
    if cost is not None:
        sweep += f"What the sweep cost: {cost.describe()}.\n"
    if not table and not sweep:
        return ""
    legend = ", ".join(f"{_SHORT[p]} = {LABELS[p]}" for p in LABELS)
    return ("\n## Start-up: process start to first step (s, slowest rank per phase)\n\n"
            + table + ("\n" if table else "") + sweep
            + f"\nPhases: {legend}. Median over a point's runs.\n")
