"""One line of a shared launch's state file: a point started or ended, as rank 0 saw it.

Rank 0 appends them (``hvdscale/train/points.py``) while the launch runs; the sweep reads them
(``hvdscale/study/sweep/shared_launch.py``) to hold each point to its time limit, tell each
point's end, and know where a launch that ended early was.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from hvdscale.records.fields import Doc, Record

POINTS = "train/points.py"


class PointState(Record, tag="point_state", kw_only=True):
    """A point's start or end in a shared launch (``logs/<launch>.state.jsonl``)."""

    kind: ClassVar[str] = "point_state"
    summary: ClassVar[str] = "a point's start or end in a shared launch (logs/*.state.jsonl)"

    at: Annotated[float, Doc("when (epoch)", "s", POINTS)]
    position: Annotated[int, Doc("the point's place in the launch, from 0", writer=POINTS)]
    event: Annotated[Literal["start", "end"], Doc("start or end", writer=POINTS)]
    label: Annotated[str | None, Doc("the point's label (at its start)", writer=POINTS)] = None
    status: Annotated[str | None, Doc("ok or failed (at its end)", writer=POINTS)] = None
    teardown_s: Annotated[float | None, Doc("its teardown (at its end)", "s", POINTS)] = None
