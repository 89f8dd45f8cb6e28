"""What became of each point of a sweep (one launch of its own, or one place in a shared one)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hvdscale.records.failed import FailedRecord
from hvdscale.records.run import RunRecord
from hvdscale.records.store import append_record
from hvdscale.study.sweep.plan import Point, SweepSpec
from hvdscale.study.sweep.timing import LaunchTiming


@dataclass
class Outcome:
    """What became of one point."""

    point: Point
    status: str  # "ok", "skipped" or "failed"
    seconds: float = 0.0
    words_per_s: float | None = None
    error: str = ""  # why it failed; for an ok point, a note (e.g. it overran while exiting)
    log: Path | None = None
    record: RunRecord | None = None
    timing: LaunchTiming | None = None  # when the launch spawned and exited (overhead)


@dataclass
class SweepResult:
    """All outcomes, in launch order."""

    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def failed(self) -> list[Outcome]:
        """The outcomes that failed."""
        return [o for o in self.outcomes if o.status == "failed"]


def failed_record(spec: SweepSpec, cfg: Any, ranks: int, why: str,
                  extra: dict[str, Any]) -> None:
    """The sweep's failed record of a point (its config as run, ``cfg``) whose launch wrote
    none; ``extra`` adds what the caller knows (its start, command, log...)."""
    from hvdscale.config import to_dict
    from hvdscale.records.store import record_key

    now = datetime.now(UTC).isoformat(timespec="seconds")
    append_record(spec.out, FailedRecord.from_dict({
        "status": "failed", "name": cfg.name, "started": now, "finished": now,
        "key": record_key(cfg), "ranks": ranks, "workers": cfg.strategy.workers(ranks),
        "config": to_dict(cfg), "launcher": spec.launcher, "error": why, **extra},
        where="the failed record being written"))
