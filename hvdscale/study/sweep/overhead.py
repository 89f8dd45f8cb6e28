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

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TIMING_FILE = "sweep_timing.jsonl"


@dataclass
class LaunchTiming:
    """Wall-clock (epoch) marks of one launch, filled in as it goes."""

    begin: float = field(default_factory=time.time)  # before the load sample
    sampled: float = 0.0
    spawned: float = 0.0
    exited: float = 0.0

    def entry(self, record: dict[str, Any] | None, previous_exit: float | None) -> dict[str, Any]:
        """The launch's line (``record``: its ok record, for the ranks' process starts)."""
        startup = (record or {}).get("startup") or {}
        first = startup.get("first_process_start")
        after = self.begin - previous_exit if previous_exit is not None else 0.0
        out = {"sample_s": self.sampled - self.begin, "prepare_s": self.spawned - self.sampled,
               "launch_s": self.exited - self.spawned, "after_s": after,
               "launcher_start_s": first - self.spawned if first is not None else None,
               "ranks_start_s": startup.get("total_max_s")}
        out["between_s"] = after + out["sample_s"] + out["prepare_s"]
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}


def write_timing(out: Path, label: str, round_: int, entry: dict[str, Any]) -> None:
    """Append one launch's timing line to ``out``'s ``sweep_timing.jsonl``."""
    line = {"point": label, "round": round_, "at": round(time.time(), 3), **entry}
    with open(Path(out) / TIMING_FILE, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
