"""Harness overhead: hvdscale's horovod step vs a minimal hand-written Horovod loop.

Run under ``mpirun -np 2 python bench/bench_overhead.py``. Both loops train the same model
(hvdscale.models.torch.NMTModel, same config) on the same batch per rank; they alternate in
blocks so machine noise hits both alike, and the ratio of median step times is reported.

The minimal loop is what a Horovod user writes by hand: mean loss, backward,
``hvd.DistributedOptimizer(op=Average).step()``. hvdscale's step adds what exactness and
measurement need: the global token-count allreduce (overlapped with the forward), summed loss,
flat gradient buffers, the meter, the step watchdog and rank 0's progress report.

Issue 17 added the progress report; a third loop, hvdscale's step without it, runs in the same
blocks so that the cost of progress is a paired ratio from one run. Each progress block starts
its own reporter (as a run starts one), writing plain lines to a file on rank 0 every
``--progress-every`` seconds (default 0.1 s: five times the live line's refresh, fifty times
fewer seconds than the default plain interval, so a 5-step block sees several reports).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time

import numpy as np
from emit import emit  # bench/ is on sys.path when a script runs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--block", type=int, default=5)
    ap.add_argument("--json", default="")
    ap.add_argument("--progress-every", type=float, default=0.1)
    args = ap.parse_args()

    from hvdscale.config import load_config
    from hvdscale.core.threads import resolve_threads, thread_env
    from hvdscale.core.world import init_horovod
    from hvdscale.strategies.horovod import horovod_env

    cfg = load_config(args.config)
    local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", "1"))
    intra, inter = resolve_threads(cfg.threads.intra_op, cfg.threads.inter_op, local)
    os.environ.update(thread_env(intra, cfg.threads.mpi_yield, local))
    init_horovod(horovod_env(cfg.strategy.horovod))
    import horovod.torch as hvd
    import torch

    from hvdscale.core.data import BatchPlan, load_corpus
    from hvdscale.core.meter import StepMeter
    from hvdscale.core.progress import Progress, ProgressReport
    from hvdscale.core.supervise import StepWatchdog
    from hvdscale.core.world import make_world
    from hvdscale.frameworks.torch import TorchAdapter, set_threads
    from hvdscale.models.torch import build_model
    from hvdscale.strategies.horovod import HorovodTorch

    set_threads(intra, inter)
    world = make_world(True)
    rank = hvd.rank()
    corpus = load_corpus(cfg.data, cfg.model.kind, cfg.model.src_vocab, cfg.model.tgt_vocab,
                         rank, hvd.size())
    batch = next(BatchPlan(corpus, cfg.data, cfg.model.kind, cfg.data.batch_size,
                           rank).batches())
    m = cfg.model

    # hvdscale's path: adapter + HorovodTorch strategy + meter + watchdog, as in runner.py.
    adapter = TorchAdapter(m, cfg.optim, m.src_vocab, m.tgt_vocab)
    strategy = HorovodTorch(cfg.strategy.horovod)
    strategy.setup(adapter)
    meter = StepMeter(0)
    watchdog = StepWatchdog(cfg.measure.step_timeout_s, rank)

    # As in a run: rank 0 reports (plain lines, here into a file), the other ranks do nothing.
    sink = tempfile.TemporaryFile("w+") if rank == 0 else None
    progress: ProgressReport = ProgressReport()

    def hvdscale_step(step: int) -> None:
        watchdog.start_step(step)
        meter.start_step()
        loss = strategy.step(batch)
        meter.end_step(step, batch.words, batch.loss_tokens, batch.padded_tokens,
                       batch.sentences, loss)
        watchdog.end_step()
        progress.step(step)

    # The minimal hand-written loop.
    torch.manual_seed(m.seed)
    model = build_model(m.kind, m.rnn_impl, m.src_vocab, m.tgt_vocab, m.embed_dim,
                        m.hidden_size, m.encoder_layers, m.decoder_layers, m.bidirectional,
                        m.attention)
    opt = torch.optim.SGD(model.parameters(), lr=cfg.optim.lr)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                   op=hvd.Average)
    tensors = adapter.tensors(batch)

    def minimal_step(step: int) -> None:
        opt.zero_grad()
        loss, tokens = model(**tensors)
        (loss / tokens).backward()
        opt.step()

    loops = ("hvdscale", "hvdscale_no_progress", "minimal")
    times: dict[str, list[float]] = {k: [] for k in loops}
    load_before = os.getloadavg()
    for _ in range(3):  # warm-up all
        hvdscale_step(0)
        minimal_step(0)
    orders = list(itertools.permutations(loops))
    for r in range(args.rounds):
        for name in orders[r % len(orders)]:  # every order in turn: noise hits all alike
            fn = minimal_step if name == "minimal" else hvdscale_step
            if name == "hvdscale" and sink is not None:
                progress = Progress(sink, every_s=args.progress_every, live=False)
                progress.begin(0, args.block, meter=meter)
            world.barrier()
            for i in range(args.block):
                t = time.perf_counter()
                fn(i)
                times[name].append(time.perf_counter() - t)
            progress.close()
            progress = ProgressReport()
    watchdog.stop()
    load_after = os.getloadavg()
    # A job's step lasts as long as its slowest rank: take the max over ranks per step.
    mats = {k: np.max(np.array(world.allgather(v)), axis=0) for k, v in times.items()}
    if rank == 0:
        med = {k: float(np.median(v)) for k, v in mats.items()}
        # Paired: per round, the median step of one loop's block over the other's.
        per_round = {k: np.median(v.reshape(args.rounds, args.block), axis=1)
                     for k, v in mats.items()}
        sink.seek(0)
        reports = sum(1 for _ in sink)
        micro = _micro_costs(Progress, meter, args.block)
        out = {"config": args.config, "ranks": hvd.size(), "steps_each": len(mats["minimal"]),
               "rounds": args.rounds, "block": args.block,
               "progress_every_s": args.progress_every, "progress_lines_written": reports,
               "loadavg_before": list(load_before), "loadavg_after": list(load_after),
               "median_step_s": med, "ratio": med["hvdscale"] / med["minimal"],
               "overhead_pct": 100.0 * (med["hvdscale"] / med["minimal"] - 1),
               "overhead_pct_without_progress":
                   100.0 * (med["hvdscale_no_progress"] / med["minimal"] - 1),
               "progress_ratio": med["hvdscale"] / med["hvdscale_no_progress"],
               "progress_ratio_paired_rounds": float(np.median(
                   per_round["hvdscale"] / per_round["hvdscale_no_progress"])),
               "progress_ratio_paired_rounds_iqr": [float(q) for q in np.percentile(
                   per_round["hvdscale"] / per_round["hvdscale_no_progress"], [25, 75])],
               **micro}
        emit(out, args.json)
    return 0


def _micro_costs(progress_cls: type, meter: object, steps: int) -> dict[str, float]:
    """The progress report's own costs, which machine noise cannot hide: one ``step()`` call
    (what the training loop pays per step) and one report (format and write a line, paid by
    the reporting thread on its interval), medians of repeated timings."""
    with tempfile.TemporaryFile("w") as f:
        p = progress_cls(f, every_s=3600.0, live=False)  # the thread stays asleep
        p.begin(0, 10**9, meter=meter)
        n = 20000
        per_call = []
        for _ in range(7):
            t = time.perf_counter()
            for i in range(n):
                p.step(i)
            per_call.append((time.perf_counter() - t) / n)
        per_report = []
        for _ in range(7):
            t = time.perf_counter()
            for _ in range(200):
                p.report()
            per_report.append((time.perf_counter() - t) / 200)
        p.close()
    return {"step_call_us": 1e6 * float(np.median(per_call)),
            "report_us": 1e6 * float(np.median(per_report))}


if __name__ == "__main__":
    sys.exit(main())
