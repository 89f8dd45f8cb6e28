"""``--bench``: a short mpi4py allreduce at a few sizes, within a time budget, beside the bus
bandwidth the link class should give (``network.link_class``)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from hvdscale.doctor.lines import OK, WARN, Line

SIZES = (64 * 1024, 1024**2, 16 * 1024**2)
REPEATS = 5
BUDGET_S = 20.0
"""No new size starts after this many seconds (a slow link ends the bench early)."""


def busbw_factor(n: int) -> float:
    """Bytes each rank moves per payload byte in a ring allreduce: 2(n-1)/n."""
    return 2 * (n - 1) / n


def allreduce_bench(comm: Any, sizes: tuple[int, ...] = SIZES, repeats: int = REPEATS,
                    budget_s: float = BUDGET_S) -> list[dict[str, Any]]:
    """Time float32 sum-allreduces on ``comm`` (an mpi4py communicator; every rank calls).

    Each repeat is timed from a barrier; the slowest rank's time counts, and a size's time is
    the median over its repeats. Rank 0 decides for all whether the next size still fits the
    budget, so every rank runs the same collectives.
    """
    from mpi4py import MPI

    start, points = time.perf_counter(), []
    for nbytes in sizes:
        go = comm.bcast(time.perf_counter() - start < budget_s, root=0)  # hvd:
        if not go:
            break
        send = np.ones(nbytes // 4, dtype=np.float32)
        recv = np.empty_like(send)
        comm.Allreduce(send, recv, op=MPI.SUM)  # hvd: warm-up (connections, buffers)
        times = np.empty(repeats)
        for i in range(repeats):
            comm.Barrier()  # hvd:
            t0 = time.perf_counter()
            comm.Allreduce(send, recv, op=MPI.SUM)  # hvd:
            times[i] = time.perf_counter() - t0
        slowest = np.empty_like(times)
        comm.Allreduce(times, slowest, op=MPI.MAX)  # hvd:
        t = float(np.median(slowest))
        points.append({"bytes": nbytes, "time_s": t,
                       "busbw_GBps": nbytes / t / 1e9 * busbw_factor(comm.Get_size())})
    return points


def check_bench(points: list[dict[str, Any]], link: str, expected_gbps: float | None,
                ranks: int) -> Line:
    """The largest size's bus bandwidth against what ``link`` should give (warn below it)."""
    if ranks < 2:
        return Line("bench", OK, "skipped: one rank (mpirun -np 2 hvdscale doctor --bench)")
    if not points:
        return Line("bench", WARN, "no size finished in the time budget", "check the link")
    shown = ", ".join(f"{p['bytes'] // 1024} KiB {p['busbw_GBps']:.2f}" for p in points)
    best = points[-1]["busbw_GBps"]
    value = f"allreduce busbw GB/s: {shown}; link {link}"
    if expected_gbps is None:
        return Line("bench", OK, f"{value} (no expected figure for it)")
    value += f", expected >= {expected_gbps:.2f}"
    if best < expected_gbps:
        return Line("bench", WARN, value,
                    "check load, the interface used (OMPI_MCA_btl_tcp_if_include), the link")
    return Line("bench", OK, value)
