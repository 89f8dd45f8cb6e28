"""The batch record: words/s against the per-rank batch, beside the layer GEMM's speed
(``hvdscale batch``, written by ``hvdscale/study/stepcost/batch.py``)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from hvdscale.records.fields import Doc, Record
from hvdscale.records.study import LoadPair

W = "study/stepcost/batch.py"


class BatchRecord(Record, tag="batch", kw_only=True):
    """One `hvdscale batch` measurement."""

    kind: ClassVar[str] = "batch"
    summary: ClassVar[str] = "words/s against the per-rank batch, beside the GEMM's speed"

    status: Annotated[str, Doc("ok", writer=W)]
    started: Annotated[str, Doc("when it started (ISO 8601, UTC)", writer=W)]
    finished: Annotated[str, Doc("when it finished (ISO 8601, UTC)", writer=W)]
    name: Annotated[str, Doc("the config's name", writer=W)]
    framework: Annotated[str, Doc("torch or tf", writer=W)]
    config: Annotated[dict[str, Any], Doc("the resolved config", writer=W)]
    strategy: Annotated[str, Doc("the strategy each point ran (np=1)", writer=W)]
    hidden: Annotated[int, Doc("the model's hidden size", writer=W)]
    threads: Annotated[int, Doc("compute threads", writer=W)]
    points: Annotated[list[dict[str, Any]], Doc("per batch: status, words/s, step time",
                                                "words/s", W)]
    gemm: Annotated[dict[str, Any], Doc("the layer GEMM at those batches: rows, peak",
                                        "GFLOP/s", W)]
    loadavg: Annotated[LoadPair, Doc("the host's load", writer=W)]
    versions: Annotated[dict[str, Any], Doc("library versions", writer=W)]
    git: Annotated[str | None, Doc("the checkout's revision", writer=W)]
    plot: Annotated[str | None, Doc("the plot written", writer="commands/batch.py")] = None
