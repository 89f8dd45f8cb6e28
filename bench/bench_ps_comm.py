"""Parameter-server communication per step vs an alpha-beta prediction vs Horovod allreduce.

Run on N ranks (N = 2 or 3; add ``--launcher-args=--oversubscribe`` for 3 on 2 cores) with the
sweep's launch line:

    python -m hvdscale.study.sweep.launcher --np N -- python bench/bench_ps_comm.py

In one job:

1. alpha (latency) and beta (seconds per byte) from an mpi4py ping-pong between ranks 0 and 1;
2. a communication-heavy model (large vocabularies, tiny batch: big parameters, small step);
3. the real ``ps`` strategy for each placement: per-step exchange time (push gradients, server
   sum + update, pull parameters), median over steps, next to the prediction;
4. Horovod's allreduce of the same number of bytes, median over repeats.

Prediction: every message of b bytes costs alpha + b*beta to both ranks it touches (once for a
message a rank sends itself), summed per rank; the step takes as long as the busiest rank. Each
worker sends and receives the whole model once (split over the servers); a server moves
W x its shard in each direction, so one server moves W times the model.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np
from emit import emit  # bench/ is on sys.path when a script runs

from hvdscale.study.commbench.configs import COMM_HEAVY


def pingpong(comm, nbytes: int, reps: int) -> float:
    """One-way time of a message of ``nbytes`` between ranks 0 and 1 (median of round trips)."""
    buf = np.zeros(max(1, nbytes // 4), dtype=np.float32)
    times = []
    for _ in range(reps):
        comm.Barrier()
        t = time.perf_counter()
        if comm.rank == 0:
            comm.Send(buf, dest=1)
            comm.Recv(buf, source=1)
        elif comm.rank == 1:
            comm.Recv(buf, source=0)
            comm.Send(buf, dest=0)
        times.append((time.perf_counter() - t) / 2)
    return float(comm.bcast(np.median(times), root=0))


def predict(servers: list[int], workers: list[int], shard_bytes: list[int], alpha: float,
            beta: float) -> float:
    """Busiest rank's summed message costs for one push + pull round."""
    load: dict[int, float] = {}
    for s, b in zip(servers, shard_bytes, strict=True):
        for w in workers:
            for src, dst in ((w, s), (s, w)):  # gradient push, parameter pull
                c = alpha + b * beta
                load[src] = load.get(src, 0.0) + c
                if dst != src:
                    load[dst] = load.get(dst, 0.0) + c
    return max(load.values())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--json", default="")
    args = ap.parse_args()

    from hvdscale.core.threads import export_threads

    # One compute thread per rank, as a run with threads.intra_op=1 sets it (every launcher's
    # local size; a user's exported mpi_yield kept).
    export_threads(1, 0, "auto")
    import torch  # noqa: F401  (torch loads before mpi4py, as in a run)
    from mpi4py import MPI

    from hvdscale.config import load_config
    from hvdscale.core.world import MPIWorld
    from hvdscale.frameworks.torch import TorchAdapter, set_threads

    set_threads(1, 1)
    comm = MPI.COMM_WORLD
    world = MPIWorld()
    n = comm.size
    cfg0 = load_config(None, list(COMM_HEAVY))
    model_bytes = TorchAdapter(cfg0.model, cfg0.optim, 40000, 40000).num_params * 4
    alpha = pingpong(comm, 8, 200)
    big = pingpong(comm, model_bytes, 10)
    beta = (big - alpha) / model_bytes

    placements = [("colocated", 1), ("colocated", n)]
    if n >= 3:
        placements.append(("dedicated", 1))
    rows = [ps_row(placement, servers, comm, world, args.steps, alpha, beta)
            for placement, servers in placements]
    ar_t = horovod_allreduce_s(comm, model_bytes, args.steps)
    # Ring allreduce: 2(N-1) steps, each moving M/N bytes through every rank.
    ring_pred = 2 * (n - 1) * (alpha + model_bytes / n * beta)
    if comm.rank == 0:
        out = {"ranks": n, "model_bytes": model_bytes, "alpha_s": alpha, "beta_s_per_byte": beta,
               "bandwidth_GBps": 1e-9 / beta if beta > 0 else None, "ps": rows,
               "horovod_allreduce_median_s": ar_t, "horovod_ring_predicted_s": ring_pred}
        emit(out, args.json)
    return 0


def ps_row(placement: str, servers: int, comm: Any, world: Any, steps: int, alpha: float,
           beta: float) -> dict[str, Any]:
    """The ``ps`` strategy at one placement: ``steps`` steps (the first 3 not counted), its
    measured exchange time per step next to the prediction."""
    from hvdscale.config import load_config
    from hvdscale.core.batching import BatchPlan
    from hvdscale.corpora.corpus import load_corpus
    from hvdscale.frameworks.torch import TorchAdapter
    from hvdscale.strategies.param_server import ParameterServer

    cfg = load_config(None, [*COMM_HEAVY, "strategy.name=ps", f"strategy.ps.placement={placement}",
                             f"strategy.ps.num_servers={servers}"])
    ps = ParameterServer(cfg.strategy.ps, world)
    adapter = TorchAdapter(cfg.model, cfg.optim, 40000, 40000)
    ps.setup(adapter)
    batches = None
    if ps.computes:
        corpus = load_corpus(cfg.data, "nmt", 40000, 40000, ps.worker_index, ps.num_workers)
        batches = BatchPlan(corpus, cfg.data, "nmt", 4, ps.worker_index).batches()
    step_times = []
    for _ in range(steps):
        comm.Barrier()
        t = time.perf_counter()
        ps.step(next(batches) if batches is not None else None)
        step_times.append(time.perf_counter() - t)
    warm = 3
    comm_t = np.max(np.array(comm.allgather(ps.comm_times[warm:])), axis=0)
    upd = comm.allgather(ps.server_compute_times[warm:])
    upd_med = float(np.median([np.median(u) for u in upd if u]))
    step_t = np.max(np.array(comm.allgather(step_times[warm:])), axis=0)
    info = ps.info()
    pred = predict(ps.servers, ps.workers, info["bytes_per_server"], alpha, beta)
    return {"placement": placement, "servers": servers, "workers": ps.num_workers,
            "comm_median_s": float(np.median(comm_t)), "predicted_s": pred,
            "measured_over_predicted": float(np.median(comm_t)) / pred,
            "server_update_median_s": upd_med,
            "step_median_s": float(np.median(step_t)),
            "bytes_per_server": info["bytes_per_server"]}


def horovod_allreduce_s(comm: Any, model_bytes: int, steps: int) -> float:
    """Horovod's allreduce of ``model_bytes`` (one flat fp32 tensor: what fusion would build):
    median over ``steps`` repeats of the slowest rank's time."""
    import torch

    from hvdscale.core.world import init_horovod

    # Horovod starts only now: a ps run never starts it, and its background thread would
    # compete with the parameter server's ranks for the cores.
    init_horovod({}, "horovod.torch")
    import horovod.torch as hvd

    flat = torch.zeros(model_bytes // 4)
    for _ in range(3):
        hvd.allreduce_(flat, op=hvd.Sum, name="bench.flat")
    ar = []
    for _ in range(steps):
        comm.Barrier()
        t = time.perf_counter()
        hvd.allreduce_(flat, op=hvd.Sum, name="bench.flat")
        ar.append(time.perf_counter() - t)
    return float(np.median(np.max(np.array(comm.allgather(ar)), axis=0)))


if __name__ == "__main__":
    sys.exit(main())
