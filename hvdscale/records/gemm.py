"""The gemm record: an RNN layer's GEMM speed per framework, hidden size and batch
(``hvdscale gemm``, written by ``hvdscale/study/stepcost/gemm.py``)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from hvdscale.records.fields import Doc, Record
from hvdscale.records.study import LoadPair

W = "study/stepcost/gemm.py run_gemm"


class GemmRecord(Record, tag="gemm", kw_only=True):
    """One `hvdscale gemm` measurement."""

    kind: ClassVar[str] = "gemm"
    summary: ClassVar[str] = "GEMM speed of an RNN layer per framework, hidden size and batch"

    status: Annotated[str, Doc("ok", writer=W)]
    started: Annotated[str, Doc("when it started (ISO 8601, UTC)", writer=W)]
    finished: Annotated[str, Doc("when it finished (ISO 8601, UTC)", writer=W)]
    host: Annotated[str, Doc("the host", writer=W)]
    threads: Annotated[int, Doc("compute threads", writer=W)]
    clock: Annotated[str, Doc("wall or cpu (process) clock", writer=W)]
    gates: Annotated[int, Doc("gates of the cell (4: LSTM): M = gates x hidden", writer=W)]
    repeats: Annotated[int, Doc("timed repeats per shape (median taken)", writer=W)]
    warmup: Annotated[int, Doc("untimed repeats first", writer=W)]
    min_time_s: Annotated[float, Doc("least time a repeat measures", "s", W)]
    hidden: Annotated[list[int], Doc("hidden sizes", writer=W)]
    batch: Annotated[list[int], Doc("batch sizes (N)", writer=W)]
    loadavg: Annotated[LoadPair, Doc("the host's load", writer=W)]
    versions: Annotated[dict[str, Any], Doc("library versions", writer=W)]
    git: Annotated[str | None, Doc("the checkout's revision", writer=W)]
    frameworks: Annotated[list[dict[str, Any]], Doc("per framework: rows of (variant, hidden, "
                                                    "batch, seconds, GFLOP/s), peak, fits",
                                                    "GFLOP/s", W)]
    device: Annotated[str | None, Doc("cpu or cuda", writer=W)] = None
    precisions: Annotated[list[str] | None, Doc("dtypes measured", writer=W)] = None
    plots: Annotated[list[str] | None, Doc("plot files written", writer="commands/gemm.py")
                     ] = None

