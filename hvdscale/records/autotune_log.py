"""Reading the log Horovod 0.28.1's autotuner writes: every trial and the setting it chose.

Written by the coordinator (rank 0) only. Nothing here imports Horovod or a framework.

Autotune log (``horovod/common/parameter_manager.cc``): a CSV with the header
``hierarchical_allreduce,hierarchical_allgather,torus_allreduce,cache_enabled,cycle_time_ms,
tensor_fusion_threshold,score``, one row per trial (threshold in MiB, score in bytes/us), and,
once tuning has finished, one more row with the best values.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from hvdscale.records.timeline import TimelineError

AUTOTUNE_COLUMNS = ("hierarchical_allreduce", "hierarchical_allgather", "torus_allreduce",
                    "cache_enabled", "cycle_time_ms", "tensor_fusion_threshold", "score")


def read_autotune_log(path: str | Path) -> dict[str, Any]:
    """Parse Horovod's autotune CSV: every trial and the chosen (last row's) setting.

    Returns:
        ``trials`` (rows as dicts: cycle_time_ms, fusion_threshold_mb, score, ...),
        ``chosen`` (the last row: the best setting once tuning finished, else the setting of
        the last trial), and ``finished`` (whether that last row is the best-setting row).

    Raises:
        TimelineError: missing, empty, wrong header or a row that is not numbers.
    """
    p = Path(path)
    if not p.is_file():
        raise TimelineError(f"Horovod autotune log {p} does not exist (did the run set "
                            "strategy.horovod.autotune and autotune_log?)")
    lines = [ln for ln in p.read_text(errors="replace").splitlines() if ln.strip()]
    if not lines:
        raise TimelineError(f"Horovod autotune log {p} is empty")
    header = [c.strip() for c in lines[0].split(",")]
    if tuple(header) != AUTOTUNE_COLUMNS:
        raise TimelineError(f"Horovod autotune log {p} is malformed: header {lines[0]!r}, "
                            f"expected {','.join(AUTOTUNE_COLUMNS)}")
    rows = []
    for n, row in enumerate(csv.reader(lines[1:]), 2):
        if len(row) != len(AUTOTUNE_COLUMNS):
            raise TimelineError(f"Horovod autotune log {p} is malformed: line {n} has "
                                f"{len(row)} fields, expected {len(AUTOTUNE_COLUMNS)}")
        try:
            vals = [float(v) for v in row]
        except ValueError:
            raise TimelineError(f"Horovod autotune log {p} is malformed: line {n} is not all "
                                f"numbers ({','.join(row)!r})") from None
        r = dict(zip(AUTOTUNE_COLUMNS, vals, strict=True))
        rows.append({"hierarchical_allreduce": bool(r["hierarchical_allreduce"]),
                     "hierarchical_allgather": bool(r["hierarchical_allgather"]),
                     "torus_allreduce": bool(r["torus_allreduce"]),
                     "cache_enabled": bool(r["cache_enabled"]),
                     "cycle_time_ms": r["cycle_time_ms"],
                     "fusion_threshold_mb": r["tensor_fusion_threshold"],
                     "score": r["score"]})
    if not rows:
        raise TimelineError(f"Horovod autotune log {p} has a header but no trial (the run "
                            "ended before the autotuner's warm-up samples were done)")
    # Once tuning is over Horovod appends the best setting with its score: a repeat of the
    # best trial's row (same values, same score, same formatting).
    *trials, last = rows
    best = max(trials, key=lambda t: t["score"]) if trials else None
    finished = best is not None and best == last
    return {"trials": trials if finished else rows, "chosen": last, "finished": finished}
