"""The commbench record: allreduce and parameter-server transfer times by message size and
transport (``hvdscale commbench``, written by ``hvdscale/study/commbench/launch.py``)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from hvdscale.records.fields import Doc, Record

W = "study/commbench/launch.py"


class CommbenchRecord(Record, tag="commbench", kw_only=True):
    """One `hvdscale commbench` measurement."""

    kind: ClassVar[str] = "commbench"
    summary: ClassVar[str] = "allreduce and parameter-server times by size and transport"

    ranks: Annotated[int, Doc("ranks", writer=W)]
    sizes: Annotated[list[int], Doc("message sizes", "bytes", W)]
    started: Annotated[str, Doc("when its first job started (ISO 8601, UTC)", writer=W)]
    ps: Annotated[dict[str, Any], Doc("the parameter server's servers and placement",
                                      writer=W)]
    memcpy: Annotated[dict[str, Any], Doc("the host's copy bandwidth, alone and concurrent",
                                          "GB/s", W)]
    jobs: Annotated[dict[str, Any], Doc("per job: command, load, backend, settings", writer=W)]
    transports: Annotated[dict[str, Any], Doc("per transport: time by size and its fit (alpha, "
                                              "beta)", "s", W)]
    loadavg_before: Annotated[list[float], Doc("the host's load before", writer=W)]
    loadavg_after: Annotated[list[float], Doc("the host's load after", writer=W)]
    versions: Annotated[dict[str, Any], Doc("library versions", writer=W)]
    git: Annotated[str | None, Doc("the checkout's revision", writer=W)]
    oversubscribed: Annotated[bool, Doc("more ranks than cores", writer=W)]
