"""The rank side of commbench: what each rank of a launched job runs (``python -m
hvdscale.study.commbench``, started by ``run_commbench``). It times the transports over flat
float32 buffers, and a memory copy as the host's reference; rank 0 writes the job's result."""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from hvdscale.registry import FRAMEWORKS
from hvdscale.study.commbench.sizes import repeats_for

# Open MPI settings that say which transport carries the bytes, recorded per rank.
MCA_FACTS = ("btl", "pml", "btl_tcp_if_include", "oob_tcp_if_include")


def _timed(op: Callable[[], Any], barrier: Callable[[], None], reps: int,
           warmup: int) -> list[float]:
    for _ in range(warmup):
        barrier()
        op()
    out = []
    for _ in range(reps):
        barrier()  # every rank starts each repeat together
        t = time.perf_counter()
        op()
        out.append(time.perf_counter() - t)
    return out


def memcpy_bandwidth(world: Any, nbytes: int = 64 << 20, reps: int = 10) -> dict[str, float]:
    """Memory-copy bandwidth (bytes copied per second; each byte read once, written once):
    rank 0 alone while the others wait, then every rank at once (median per rank, then the
    median of those)."""
    src = np.ones(nbytes // 8)
    dst = np.empty_like(src)
    np.copyto(dst, src)

    def alone() -> None:
        if world.rank == 0:
            np.copyto(dst, src)

    t_alone = _timed(alone, world.barrier, reps, 1)
    t_all = _timed(lambda: np.copyto(dst, src), world.barrier, reps, 1)
    every = world.allgather(float(np.median(t_all)))
    return {"bytes": nbytes, "alone_GBps": nbytes / float(np.median(t_alone)) / 1e9,
            "concurrent_GBps": nbytes / float(np.median(every)) / 1e9,
            "concurrent_per_rank_GBps": [nbytes / t / 1e9 for t in every]}


class _StubAdapter:
    """Flat buffers of a given size standing in for a model: what ``ParameterServer`` moves."""

    framework = "none"
    compute_s = 0.0

    def __init__(self, elements: int) -> None:
        self.num_params = elements
        self.p = np.ones(elements, dtype=np.float32)
        self.g = np.ones(elements, dtype=np.float32)

    def params_buffer(self) -> np.ndarray:
        return self.p

    def grads_buffer(self) -> np.ndarray:
        return self.g

    def params_changed(self) -> None:
        pass

    def zero_grad(self) -> None:
        pass  # the bytes moved are what is timed, not their values

    def shard_optimizer(self, shard: np.ndarray) -> Any:
        class _NoUpdate:
            grad = np.zeros_like(shard)

            def step(self) -> None:
                pass

        return _NoUpdate()


def _gather_times(world: Any, times: list[float]) -> list[float]:
    """Per repeat, the slowest rank's time."""
    return [float(x) for x in np.max(np.array(world.allgather(times)), axis=0)]


def _bench_mpi4py(world: Any, sizes: list[int], repeats: int, warmup: int) -> list[dict]:
    from mpi4py import MPI

    out = []
    for size in sizes:
        send = np.ones(size // 4, dtype=np.float32)
        recv = np.empty_like(send)
        t = _timed(lambda s=send, r=recv: world.comm.Allreduce(s, r, op=MPI.SUM),
                   world.barrier, repeats_for(size, repeats), warmup)
        out.append({"bytes": size, "times_s": _gather_times(world, t)})
    return out


def _bench_p2p(world: Any, sizes: list[int], repeats: int, warmup: int) -> list[dict]:
    """Ping-pong between ranks 0 and 1 (the others wait): 0 sends ``size`` bytes, 1 sends them
    back; one direction at a time, so each message has the link to itself."""
    out = []
    for size in sizes:
        buf = np.ones(size // 4, dtype=np.float32)

        def pingpong(b: np.ndarray = buf) -> None:
            if world.rank == 0:
                world.comm.Send(b, dest=1)
                world.comm.Recv(b, source=1)
            elif world.rank == 1:
                world.comm.Recv(b, source=0)
                world.comm.Send(b, dest=0)

        t = _timed(pingpong, world.barrier, repeats_for(size, repeats), warmup)
        out.append({"bytes": size, "times_s": _gather_times(world, t)})
    return out


def _bench_ps(world: Any, sizes: list[int], repeats: int, warmup: int, servers: int,
              placement: str) -> list[dict]:
    from hvdscale.config import PSConfig
    from hvdscale.strategies.param_server import ParameterServer

    out = []
    for size in sizes:
        ps = ParameterServer(PSConfig(num_servers=servers, placement=placement), world)
        ps.setup(_StubAdapter(size // 4))  # type: ignore[arg-type]
        # step(None): every worker pushes its gradient shards and a token count, servers
        # receive them all and send their shards back (no update with zero tokens).
        t = _timed(lambda p=ps: p.step(None), world.barrier, repeats_for(size, repeats), warmup)
        out.append({"bytes": size, "times_s": _gather_times(world, t)})
        del ps
    return out


def _bench_horovod(world: Any, horovod: Any, sizes: list[int], repeats: int,
                   warmup: int) -> list[dict]:
    """Horovod's allreduce through the framework integration ``horovod`` (a ``HOROVOD`` hook)."""
    out = []
    for size in sizes:
        op = horovod.allreduce_op(size, f"commbench.{size}")
        t = _timed(op, world.barrier, repeats_for(size, repeats), warmup)
        out.append({"bytes": size, "times_s": _gather_times(world, t)})
    return out


def _parse_args(argv: Sequence[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m hvdscale.study.commbench")
    ap.add_argument("--transports", required=True)
    ap.add_argument("--sizes", required=True)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--ps-servers", type=int, default=1)
    ap.add_argument("--ps-placement", default="colocated")
    ap.add_argument("--result", required=True)
    # Whose Horovod integration carries the horovod transports (the registry's first, torch,
    # unless asked).
    ap.add_argument("--framework", default=FRAMEWORKS[0], choices=FRAMEWORKS)
    return ap.parse_args(argv)


def _measure(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """This job's world and its measurements: the memory copy before, then every transport
    this launch serves (Horovod's Gloo controller alone under horovodrun --gloo)."""
    from hvdscale.core.world import HorovodWorld, MPIWorld, init_horovod, is_gloo_launch
    from hvdscale.frameworks import load_framework

    transports = args.transports.split(",")
    sizes = [int(s) for s in args.sizes.split(",")]
    started = datetime.now(UTC).isoformat(timespec="seconds")
    res: dict[str, Any] = {"transports": {}, "started": started}
    horovod = load_framework(args.framework).HOROVOD
    if is_gloo_launch():
        init_horovod({}, horovod.module)
        world: Any = HorovodWorld(horovod)
        res["memcpy_before"] = memcpy_bandwidth(world)
        res["transports"]["horovod-gloo"] = _bench_horovod(world, horovod, sizes, args.repeats,
                                                           args.warmup)
        return world, res
    world = MPIWorld()
    res["memcpy_before"] = memcpy_bandwidth(world)
    if "p2p" in transports:
        res["transports"]["p2p"] = _bench_p2p(world, sizes, args.repeats, args.warmup)
    if "mpi4py" in transports:
        res["transports"]["mpi4py"] = _bench_mpi4py(world, sizes, args.repeats, args.warmup)
    if "ps" in transports:
        res["transports"]["ps"] = _bench_ps(world, sizes, args.repeats, args.warmup,
                                            args.ps_servers, args.ps_placement)
    if "horovod-mpi" in transports:
        # Horovod starts last: its background thread would compete with the others.
        init_horovod({}, horovod.module)
        res["transports"]["horovod-mpi"] = _bench_horovod(world, horovod, sizes, args.repeats,
                                                          args.warmup)
    return world, res


def _job_facts(world: Any) -> dict[str, Any]:
    """What the job ran under: ranks, load, backend, each rank's host and Open MPI transport
    settings (what its environment says), OpenMPI's yield and Horovod's settings."""
    import socket

    mine = {"host": socket.gethostname(),
            **{k: os.environ.get(f"OMPI_MCA_{k}") for k in MCA_FACTS}}
    return {"ranks": world.size, "loadavg": list(os.getloadavg()), "backend": world.backend,
            "per_rank": world.allgather(mine),
            "mpi_yield_when_idle": os.environ.get("OMPI_MCA_mpi_yield_when_idle"),
            "horovod_env": {k: v for k, v in os.environ.items()
                            if k.startswith("HOROVOD_") and "RENDEZVOUS" not in k
                            and "GLOO" not in k and "HOSTNAME" not in k}}


def rank_main(argv: Sequence[str]) -> int:
    """One rank of a commbench job (started by ``run_commbench``); rank 0 writes the result."""
    args = _parse_args(argv)

    from hvdscale.core.supervise import report_and_abort
    from hvdscale.core.threads import launch_local_size, thread_env
    from hvdscale.core.world import launch_rank

    rank = launch_rank()
    try:
        # The runs' own settings: one compute thread, OpenMPI yielding when cores are short.
        for k, v in thread_env(1, "auto", launch_local_size()).items():
            os.environ.setdefault(k, v)
        world, res = _measure(args)
        res["memcpy_after"] = memcpy_bandwidth(world)
        res.update(_job_facts(world))
        world.barrier()
        if world.rank == 0:
            Path(args.result).write_text(json.dumps(res))
        return 0
    except BaseException as e:
        report_and_abort(e, rank)
        return 1
