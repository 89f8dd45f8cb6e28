"""The failed record: a sweep's point that wrote no run record, and why.

Written by the sweep for a launch that ended without the point's record
(``hvdscale/study/sweep/outcome.py``), or by rank 0 of a shared launch for a point that failed
on every rank (``hvdscale/train/points.py``). Its ``status`` is ``failed``; the report lists
it, and a sweep run again measures the point again (only ok records count as recorded).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from hvdscale.records.fields import Doc, Record
from hvdscale.records.launch import LaunchPlace

SWEEP = "study/sweep/outcome.py failed_record"
BOTH = "study/sweep/outcome.py or train/points.py"


class FailedRecord(Record, tag="failed", kw_only=True):
    """A point that failed."""

    kind: ClassVar[str] = "failed"
    summary: ClassVar[str] = "a sweep's point that failed, and why"

    status: Annotated[Literal["failed"], Doc("always failed", writer=BOTH)]
    started: Annotated[str, Doc("when its launch (or its turn in one) began", writer=BOTH)]
    finished: Annotated[str, Doc("when the failure was recorded", writer=BOTH)]
    ranks: Annotated[int, Doc("ranks launched", writer=BOTH)]
    error: Annotated[str, Doc("why it failed, one line", writer=BOTH)]
    name: Annotated[str | None, Doc("the config's name", writer=BOTH)] = None
    key: Annotated[dict[str, Any] | None, Doc("the point's experiment and series",
                                              writer=BOTH)] = None
    workers: Annotated[int | None, Doc("ranks that would have computed", writer=BOTH)] = None
    config: Annotated[dict[str, Any] | None, Doc("the config as run", writer=BOTH)] = None
    launcher: Annotated[str | None, Doc("mpirun, horovodrun or srun", writer=SWEEP)] = None
    command: Annotated[list[str] | None, Doc("the launch's command", writer=SWEEP)] = None
    returncode: Annotated[int | None, Doc("the launcher's exit status", writer=SWEEP)] = None
    timed_out: Annotated[bool | None, Doc("it ran past its time limit", writer=SWEEP)] = None
    seconds: Annotated[float | None, Doc("how long its launch ran", "s", SWEEP)] = None
    stderr_tail: Annotated[list[str] | None, Doc("the log's last lines", writer=SWEEP)] = None
    log: Annotated[str | None, Doc("the launch's stderr log", writer=SWEEP)] = None
    errors_per_rank: Annotated[list[str] | None, Doc(
        "each rank's error (a shared launch's point)", writer="train/points.py")] = None
    launch: Annotated[LaunchPlace | None, Doc("its place in a launch of several points",
                                              writer=BOTH)] = None

    @property
    def ok(self) -> bool:
        """Never: the point failed."""
        return False

    @property
    def strategy_name(self) -> str | None:
        """The configured strategy's name, where the record has the config."""
        return ((self.config or {}).get("strategy") or {}).get("name")
