"""The profile record: kernels, ops and time per step of the fused, loop and compiled RNN
(``hvdscale profile``, written by ``hvdscale/study/stepcost/profile.py``)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from hvdscale.records.fields import Doc, Record
from hvdscale.records.study import LoadPair

W = "study/stepcost/profile.py"


class ProfileRecord(Record, tag="profile", kw_only=True):
    """One `hvdscale profile` measurement."""

    kind: ClassVar[str] = "profile"
    summary: ClassVar[str] = "kernels, ops and time per step of the fused, loop, compiled RNN"

    status: Annotated[str, Doc("ok", writer=W)]
    started: Annotated[str, Doc("when it started (ISO 8601, UTC)", writer=W)]
    finished: Annotated[str, Doc("when it finished (ISO 8601, UTC)", writer=W)]
    host: Annotated[str, Doc("the host", writer=W)]
    name: Annotated[str, Doc("the config's name", writer=W)]
    framework: Annotated[str, Doc("torch or tf", writer=W)]
    config: Annotated[dict[str, Any], Doc("the resolved config", writer=W)]
    steps: Annotated[int, Doc("profiled steps per implementation", writer=W)]
    threads: Annotated[dict[str, Any], Doc("intra_op and inter_op threads", writer=W)]
    loadavg: Annotated[LoadPair, Doc("the host's load", writer=W)]
    versions: Annotated[dict[str, Any], Doc("library versions", writer=W)]
    git: Annotated[str | None, Doc("the checkout's revision", writer=W)]
    impls: Annotated[dict[str, Any], Doc("per implementation: ops, kernels, time per step",
                                         writer=W)]
    ratio_loop_fused: Annotated[dict[str, float], Doc("loop / fused, per count", writer=W)]
    notes: Annotated[dict[str, Any], Doc("what each count means", writer=W)]
    ratio_compiled_fused: Annotated[dict[str, float] | None, Doc(
        "compiled / fused, per count", writer=W)] = None
    gpu: Annotated[dict[str, Any] | None, Doc("the GPU (None on CPU)", writer=W)] = None
