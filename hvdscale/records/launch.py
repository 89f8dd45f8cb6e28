"""Launch records: a run's place in a launch of several points, and the sweep's line per launch.

``LaunchPlace`` is the run (or failed) record's ``launch`` section, written by rank 0 of a
shared launch (``hvdscale/train/points.py``). ``LaunchCost`` is one line of a sweep's
``sweep_timing.jsonl`` (``hvdscale/study/sweep/timing.py``): what the sweep spent around
one launch, beside what its ranks measured.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from msgspec import UnsetType

from hvdscale.records.fields import UNSET, Doc, Record, Section

TIMING_FILE = "sweep_timing.jsonl"
"""A sweep's file of LaunchCost lines, beside its results.jsonl."""

POINTS = "train/points.py"
OVERHEAD = "study/sweep/timing.py"


class LaunchPlace(Section, kw_only=True):
    """Where a point ran in a launch of several (``hvdscale run-points``)."""

    id: Annotated[str, Doc("the launch's id (its log files' stem)")]
    position: Annotated[int, Doc("the point's place in the launch, from 0")]
    shared: Annotated[bool, Doc("the launch ran several points")]
    points: Annotated[int | UnsetType, Doc("points the launch planned")] = UNSET
    after: Annotated[list[str] | UnsetType, Doc("labels of the points run before it")] = UNSET
    previous_teardown_s: Annotated[float | UnsetType | None, Doc(
        "the previous point's teardown", "s")] = UNSET
    rss_mb_before: Annotated[float | UnsetType | None, Doc(
        "the rank's resident memory when the point started", "MB")] = UNSET
    threads_before: Annotated[int | UnsetType | None, Doc(
        "the rank's OS threads when the point started")] = UNSET


class LaunchCost(Record, tag="launch", kw_only=True):
    """One launch of a sweep, as the sweep timed it (one line of ``sweep_timing.jsonl``)."""

    kind: ClassVar[str] = "launch"
    summary: ClassVar[str] = "what a sweep spent around one launch (sweep_timing.jsonl)"

    point: Annotated[str, Doc("the launch's point label (its first point's)", writer=OVERHEAD)]
    round: Annotated[int, Doc("the sweep's round", writer=OVERHEAD)]
    at: Annotated[float, Doc("when the line was written (epoch)", "s", OVERHEAD)]
    launch_s: Annotated[float, Doc("the launcher's whole run", "s", OVERHEAD)]
    sample_s: Annotated[float | None, Doc("the host's load sampled before it (a launch of "
                                          "its own)", "s", OVERHEAD)] = None
    prepare_s: Annotated[float | None, Doc("its command built, records read", "s",
                                           OVERHEAD)] = None
    after_s: Annotated[float | None, Doc("previous launcher's exit to this launch's sampling",
                                         "s", OVERHEAD)] = None
    launcher_start_s: Annotated[float | None, Doc("spawn to the first rank's process start",
                                                  "s", OVERHEAD)] = None
    ranks_start_s: Annotated[float | None, Doc("that start to the slowest rank's first step",
                                               "s", OVERHEAD)] = None
    between_s: Annotated[float | None, Doc("after + sample + prepare: the sweep's own time",
                                           "s", OVERHEAD)] = None
    shared: Annotated[bool, Doc("the launch ran several points (one line per point)",
                                writer=OVERHEAD)] = False
    launch: Annotated[str | None, Doc("a shared launch's id", writer=OVERHEAD)] = None
    position: Annotated[int | None, Doc("the point's place in it", writer=OVERHEAD)] = None
    points: Annotated[int | None, Doc("points the launch ran", writer=OVERHEAD)] = None
    point_s: Annotated[float | None, Doc("the point's own span in it", "s", OVERHEAD)] = None
    first_point_start_s: Annotated[float | None, Doc("spawn to its first point's start", "s",
                                                     OVERHEAD)] = None
