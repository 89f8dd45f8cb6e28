"""Which interleaved round a study's record measured (``hvdscale sweep --repeats``,
``hvdscale fusion``, its DDP analogue).

Paired ratios divide one setting's words/s by the reference's of the SAME round, so every
record must keep its round even when a launch of an earlier round failed (failed launches leave
no ok record, and the ok records of a point, read in order, would close up the gap). Each
round's launch therefore carries its round in the config's ``name``, a label-only field
(``hvdscale.records.experiment``): ``demo-round2`` is round 1 (0-based) of config ``demo``;
the point's identity, and so the sweep's matching of records to points, is unchanged. A launch
is tagged by ``hvdscale.study.sweep.plan.round_point``; this module reads the tags.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hvdscale.records.failed import FailedRecord
from hvdscale.records.run import RunRecord

ROUND_SUFFIX = "-round"
_TAG = re.compile(re.escape(ROUND_SUFFIX) + r"(\d+)$")


def round_of(rec: RunRecord | FailedRecord) -> int | None:
    """The 0-based round a record's name is tagged with; None for an untagged record."""
    m = _TAG.search(rec.name or "")
    return int(m.group(1)) - 1 if m else None


def untagged(name: str) -> str:
    """A config name without its round tag: ``demo-round2`` -> ``demo``."""
    return _TAG.sub("", name)


def by_round(recs: Sequence[RunRecord | FailedRecord], repeats: int) -> list[RunRecord | None]:
    """One entry per round 0 .. ``repeats``-1: that round's ok record (the latest, if the round
    was relaunched), None where its launch failed or has not run.

    Records without a round tag (written before launches were tagged) fill the rounds no tagged
    record holds, in the order they were written: right as long as none of them failed.
    """
    out: list[RunRecord | None] = [None] * repeats
    untagged = []
    for rec in recs:
        if not isinstance(rec, RunRecord):
            continue
        r = round_of(rec)
        if r is None:
            untagged.append(rec)
        elif 0 <= r < repeats:
            out[r] = rec
    free = [i for i, rec in enumerate(out) if rec is None]
    for i, rec in zip(free, untagged, strict=False):
        out[i] = rec
    return out


def words_by_round(recs: Sequence[RunRecord | FailedRecord]) -> list[float | None]:
    """One point's words/s per round (``by_round`` over as many rounds as its records tag or
    hold): what paired ratios (``hvdscale.study.paired.recommend``) divide round by round."""
    tags = [r for r in map(round_of, recs) if r is not None]
    n = max([len(recs), *(t + 1 for t in tags)])
    return [None if rec is None else rec.words_per_s for rec in by_round(recs, n)]
