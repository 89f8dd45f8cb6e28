"""The sweep's own time between points, measured like a rank's start-up
(``hvdscale.core.startup``): one line per launch in ``<out>/sweep_timing.jsonl``.

Per launch (seconds): ``sample_s`` the host's load sampled before it, ``prepare_s`` its command
built and the records read, ``launch_s`` the launcher's whole run, ``launcher_start_s`` from the
launcher's spawn to its first rank's process start (the launcher's own start-up; from the
record), ``ranks_start_s`` that rank's process start to the slowest rank's first step, and
``after_s`` from the previous launcher's exit to this launch's sampling (the record read, the
progress line). ``between_s`` = after + sample + prepare: what the sweep itself adds between
two launches, beyond the launcher.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from hvdscale.records.fields import Record
from hvdscale.records.launch import TIMING_FILE, LaunchCost
from hvdscale.records.run import RunRecord
from hvdscale.records.store import append_line
from hvdscale.study.paired.rounds import round_of


@dataclass
class LaunchTiming:
    """Wall-clock (epoch) marks of one launch, filled in as it goes."""

    begin: float = field(default_factory=time.time)  # before the load sample
    sampled: float = 0.0
    spawned: float = 0.0
    exited: float = 0.0

    def entry(self, record: RunRecord | None, previous_exit: float | None) -> dict[str, Any]:
        """The launch's line (``record``: its ok record, for the ranks' process starts)."""
        startup = record.startup if record is not None else None
        first = startup.first_process_start if startup is not None else None
        after = self.begin - previous_exit if previous_exit is not None else 0.0
        out = {"sample_s": self.sampled - self.begin, "prepare_s": self.spawned - self.sampled,
               "launch_s": self.exited - self.spawned, "after_s": after,
               "launcher_start_s": first - self.spawned if first is not None else None,
               "ranks_start_s": startup.total_max_s if startup is not None else None}
        out["between_s"] = after + out["sample_s"] + out["prepare_s"]
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}


def write_timing(out: Path, label: str, round_: int, entry: dict[str, Any]) -> None:
    """Append one launch's timing line to ``out``'s ``sweep_timing.jsonl``."""
    line = LaunchCost.from_dict({"point": label, "round": round_, "at": round(time.time(), 3),
                                 **entry}, where="the sweep's timing line being written")
    append_line(Path(out) / TIMING_FILE, line)


# --- records their sweep accounted for (issue 50) ------------------------------------------
_NP = re.compile(r" np=(\d+)$")
SLACK_S = 1.0
"""A record's ``finished`` is whole seconds; the timing line is written after the launcher exits."""


def _accounts_for(line: LaunchCost, rec: RunRecord) -> bool:
    """Whether the launch of timing ``line`` is the one that wrote ``rec``: the same rank
    count and round, and ``rec`` finished inside that launch's window."""
    m = _NP.search(line.point)
    if m is None or int(m.group(1)) != rec.workers:
        return False
    tagged = round_of(rec)
    if tagged is not None and tagged != line.round:
        return False
    try:
        done = datetime.fromisoformat(rec.finished).timestamp()
    except ValueError:
        return False
    return line.at - line.launch_s - SLACK_S <= done <= line.at + SLACK_S


def unaccounted(loaded: list[tuple[str, Record]]) -> tuple[list[tuple[str, Record]], list[str]]:
    """Split off the run records whose sweep never accounted for them.

    A sweep writes a timing line when each launch ends (``write_timing``). A record in a sweep's
    results.jsonl (a ``sweep_timing.jsonl`` beside it) that no line's launch covers finished
    after its sweep was cut (by a deadline, a kill): the sweep neither saw nor checked it, so
    it is no figure of that sweep. Records elsewhere, and records without ``finished``, are
    kept. ``loaded`` is ``records.store.load_records``'s (where, record) pairs.

    Returns:
        the records kept, and one note per record left out, naming it and why.
    """
    from hvdscale.records.reader import read

    lines: dict[Path, list[LaunchCost] | None] = {}
    kept, notes = [], []
    for where, rec in loaded:
        folder = Path(where.rsplit(":", 1)[0]).parent
        if folder not in lines:
            f = folder / TIMING_FILE
            lines[folder] = ([x for x in read(f) if isinstance(x, LaunchCost)]
                             if f.is_file() else None)
        timing = lines[folder]
        # Only a launch's run record is the sweep's to account for: a command's own summary
        # beside it (``hvdscale batch``'s, a gemm curve) comes from no launch.
        if (timing is None or not isinstance(rec, RunRecord) or not rec.finished
                or any(_accounts_for(line, rec) for line in timing)):
            kept.append((where, rec))
            continue
        notes.append(f"{where} (np={rec.workers}, finished {rec.finished}) is "
                     f"in no launch of its sweep's {TIMING_FILE}: it finished after the sweep "
                     "ended (cut by a deadline or killed), and is left out")
    return kept, notes
