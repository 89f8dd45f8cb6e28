"""A shared launch's plan: the points every rank of one ``hvdscale run-points`` launch runs.

The sweep writes it (``hvdscale/study/sweep/shared_launch.py``) in its logs/ folder before the
launch; every rank reads it (``hvdscale/train/points.py``) through the store, checked like
every record, so a bad file is one line naming the field.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from hvdscale.records.fields import Doc, Record, Section

SWEEP = "study/sweep/shared_launch.py"


class PlannedPoint(Section, kw_only=True):
    """One point of a plan: its label and how ``hvdscale run`` would be called."""

    label: Annotated[str, Doc("the point's label in the sweep's progress lines")]
    config: Annotated[str, Doc("its config file")]
    sets: Annotated[list[str], Doc("its --set overrides, in order")]


class LaunchPlan(Record, tag="launch_plan", kw_only=True):
    """What one shared launch runs (``logs/<launch>.plan.json``)."""

    kind: ClassVar[str] = "launch_plan"
    summary: ClassVar[str] = "the points one shared launch runs (logs/<launch>.plan.json)"

    launch: Annotated[str, Doc("the launch's id (its log files' stem)", writer=SWEEP)]
    points: Annotated[list[PlannedPoint], Doc("the points, in the order they run",
                                              writer=SWEEP)]
    state: Annotated[str, Doc("the file rank 0 appends each point's start and end to "
                              "(\"\": none)", writer=SWEEP)] = ""
