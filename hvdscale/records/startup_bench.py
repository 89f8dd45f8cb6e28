"""The start-up bench's record: what a launch costs before its first step, against the floor of
``import torch, horovod; hvd.init()`` under the same mpirun (``bench/bench_startup.py``)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from hvdscale.records.fields import Doc, Record

W = "bench/bench_startup.py"
EMIT = "bench/emit.py (the load while the bench ran)"


class StartupBenchRecord(Record, tag="startup_bench", kw_only=True):
    """One run of the start-up bench."""

    kind: ClassVar[str] = "startup_bench"
    summary: ClassVar[str] = "a launch's cost before its first step, against the import floor"

    bench: Annotated[str, Doc("startup", writer=W)]
    np: Annotated[list[int], Doc("rank counts measured", writer=W)]
    host_cores: Annotated[int | None, Doc("the host's cores", writer=W)]
    floor: Annotated[str, Doc("the floor's Python statement", writer=W)]
    mpirun: Annotated[str | None, Doc("the mpirun used", writer=W)]
    mpi: Annotated[str, Doc("mpirun --version's first line", writer=W)]
    run_sets: Annotated[list[str], Doc("the --set options of the tiny run", writer=W)]
    rounds: Annotated[list[dict[str, Any]], Doc("per round and np: floor, run and phases", "s",
                                                W)]
    doctor_nodns: Annotated[list[dict[str, Any]], Doc("hvdscale doctor without DNS", "s", W)]
    sweep_timing: Annotated[list[dict[str, Any]], Doc("a sweep's own lines "
                                                      "(sweep_timing.jsonl)", "s", W)]
    mpi_library: Annotated[str | None, Doc("MPI_Get_library_version", writer=W)] = None
    mpi_transports: Annotated[str | None, Doc("the transports in force", writer=W)] = None
    floor_optim: Annotated[str | None, Doc("the floor with one optimizer step", writer=W)
                           ] = None
    loadavg_emit: Annotated[list[float] | None, Doc("load when written", writer=EMIT)] = None
    load_1min_max: Annotated[float | None, Doc("highest 1-minute load recorded",
                                               writer=EMIT)] = None
    quiet: Annotated[bool | None, Doc("the host was quiet (from recorded load)", writer=EMIT)
                     ] = None
    quiet_load: Annotated[float | None, Doc("the load under which it counts as quiet",
                                            writer=EMIT)] = None
    quiet_basis: Annotated[str | None, Doc("what the verdict rests on", writer=EMIT)] = None
