"""A section the study tools' records share (gemm, batch, profile)."""

from __future__ import annotations

from typing import Annotated

from hvdscale.records.fields import Doc, Section


class LoadPair(Section, kw_only=True):
    """The host's 1, 5, 15 min load before and after the measurement."""

    before: Annotated[list[float], Doc("load averages before")]
    after: Annotated[list[float], Doc("load averages after")]

