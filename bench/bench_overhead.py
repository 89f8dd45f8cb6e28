"""Harness overhead: hvdscale's horovod step vs a minimal hand-written Horovod loop.

Run on 2 ranks with the sweep's launch line:

    python -m hvdscale.study.sweep.launcher --np 2 -- python bench/bench_overhead.py

Both loops train the same model (hvdscale.models.torch.NMTModel, same config) on the same
batch per rank; they alternate in blocks so machine noise hits both alike, and the ratio of
median step times is reported.

The minimal loop is what a Horovod user writes by hand: mean loss, backward,
``hvd.DistributedOptimizer(op=Average).step()``. hvdscale's step adds what exactness and
measurement need: the global token-count allreduce (overlapped with the forward), summed loss,
flat gradient buffers, the meter, the step watchdog and rank 0's progress report. hvdscale's
side is the run's own step loop (``hvdscale.train.loop.train_loop``, timed by
bench/harness_timing.py), so it pays all a run's step pays; each of its blocks starts with one
untimed step that opens the window (a barrier, as in a run).

Issue 17 added the progress report; a third loop, hvdscale's step without it, runs in the same
blocks so that the cost of progress is a paired ratio from one run. Each progress block starts
its own reporter (as a run starts one), writing plain lines to a file on rank 0 every
``--progress-every`` seconds (default 0.1 s: five times the live line's refresh, fifty times
fewer seconds than the default plain interval, so a 5-step block sees several reports).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from emit import emit  # bench/ is on sys.path when a script runs
from harness_timing import time_steps, time_train_loop, warm_up_loop


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--block", type=int, default=5)
    ap.add_argument("--json", default="")
    ap.add_argument("--progress-every", type=float, default=0.1)
    args = ap.parse_args()

    from hvdscale.config import load_config

    cfg = load_config(args.config)
    hvd = _start(cfg)
    parts, batch = _harness(cfg, hvd)
    minimal_step = _minimal_loop(cfg, hvd, parts.adapter, batch)
    # As in a run: rank 0 reports (plain lines, here into a file), the other ranks do nothing.
    sink = tempfile.TemporaryFile("w+") if hvd.rank() == 0 else None
    load_before = os.getloadavg()
    warm_up_loop(parts, batch, 3)  # warm-up all
    time_steps(minimal_step, 3)
    times, meter = _rounds(args, parts, batch, minimal_step, sink)
    load_after = os.getloadavg()
    # A job's step lasts as long as its slowest rank: take the max over ranks per step.
    mats = {k: np.max(np.array(parts.world.allgather(v)), axis=0) for k, v in times.items()}
    if sink is not None:
        from hvdscale.core.progress import Progress

        sink.seek(0)
        reports = sum(1 for _ in sink)
        out = {"config": args.config, "ranks": hvd.size(), "steps_each": len(mats["minimal"]),
               "rounds": args.rounds, "block": args.block,
               "progress_every_s": args.progress_every, "progress_lines_written": reports,
               "loadavg_before": list(load_before), "loadavg_after": list(load_after),
               **_ratios(mats, args.rounds, args.block),
               **_micro_costs(Progress, meter, args.block)}
        emit(out, args.json)
    return 0


def _start(cfg: Any) -> Any:
    """Thread settings, then Horovod (its PyTorch integration); returns ``horovod.torch``."""
    from hvdscale.core.threads import export_threads
    from hvdscale.core.world import init_horovod
    from hvdscale.frameworks.torch import set_threads
    from hvdscale.strategies.horovod import horovod_env

    # As a run does: every launcher's local size; a user's exported mpi_yield kept.
    intra, inter = export_threads(cfg.threads.intra_op, cfg.threads.inter_op,
                                  cfg.threads.mpi_yield)
    init_horovod(horovod_env(cfg.strategy.horovod), "horovod.torch")
    import horovod.torch as hvd

    set_threads(intra, inter)
    return hvd


def _harness(cfg: Any, hvd: Any) -> tuple[Any, Any]:
    """hvdscale's path, as a run builds it: adapter, HorovodTorch strategy, world; the loop's
    parts and this rank's first batch."""
    from hvdscale.core.batching import BatchPlan
    from hvdscale.core.world import make_world
    from hvdscale.corpora.corpus import load_corpus
    from hvdscale.frameworks.torch import HOROVOD, HorovodTorch, TorchAdapter
    from hvdscale.train.loop import LoopParts

    world = make_world(True, HOROVOD)
    rank = hvd.rank()
    corpus = load_corpus(cfg.data, cfg.model.kind, cfg.model.src_vocab, cfg.model.tgt_vocab,
                         rank, hvd.size())
    batch = next(BatchPlan(corpus, cfg.data, cfg.model.kind, cfg.data.batch_size,
                           rank).batches())
    m = cfg.model
    adapter = TorchAdapter(m, cfg.optim, m.src_vocab, m.tgt_vocab)
    strategy = HorovodTorch(cfg.strategy.horovod)
    strategy.setup(adapter)
    return LoopParts(strategy, adapter, world, cfg.measure.step_timeout_s), batch


def _minimal_loop(cfg: Any, hvd: Any, adapter: Any, batch: Any) -> Callable[[int], None]:
    """The minimal hand-written loop's step: mean loss, backward, DistributedOptimizer."""
    import torch

    from hvdscale.models import ModelSizes
    from hvdscale.models.torch import build_model

    m = cfg.model
    torch.manual_seed(m.seed)
    model = build_model(m.kind, m.rnn_impl, ModelSizes.from_config(m, m.src_vocab, m.tgt_vocab))
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

    return minimal_step


def _rounds(args: argparse.Namespace, parts: Any, batch: Any,
            minimal_step: Callable[[int], None], sink: Any) -> tuple[dict[str, list[float]], Any]:
    """Blocks of the three loops, every order in turn (noise hits all alike): each loop's step
    times, and the meter of the last harness block (for the micro costs)."""
    from hvdscale.core.progress import Progress, ProgressReport

    loops = ("hvdscale", "hvdscale_no_progress", "minimal")
    times: dict[str, list[float]] = {k: [] for k in loops}
    orders = list(itertools.permutations(loops))
    meter = None
    for r in range(args.rounds):
        for name in orders[r % len(orders)]:
            if name == "minimal":
                parts.world.barrier()
                times[name] += time_steps(minimal_step, args.block)
                continue
            # Each progress block starts its own reporter, as a run starts one.
            progress = ProgressReport()
            if name == "hvdscale" and sink is not None:
                progress = Progress(sink, every_s=args.progress_every, live=False)
            block, done = time_train_loop(dataclasses.replace(parts, progress=progress), batch,
                                          args.block)
            progress.close()
            times[name] += block
            meter = done.meter
    return times, meter


def _ratios(mats: dict[str, np.ndarray], rounds: int, block: int) -> dict[str, Any]:
    """Median step times and the overhead and progress ratios, overall and paired by round."""
    med = {k: float(np.median(v)) for k, v in mats.items()}
    # Paired: per round, the median step of one loop's block over the other's.
    per_round = {k: np.median(v.reshape(rounds, block), axis=1) for k, v in mats.items()}
    progress = per_round["hvdscale"] / per_round["hvdscale_no_progress"]
    overhead = per_round["hvdscale"] / per_round["minimal"]
    return {"median_step_s": med, "ratio": med["hvdscale"] / med["minimal"],
            "overhead_pct": 100.0 * (med["hvdscale"] / med["minimal"] - 1),
            "overhead_pct_paired_rounds": 100.0 * (float(np.median(overhead)) - 1),
            "overhead_pct_paired_rounds_range": [100.0 * (float(x) - 1)
                                                 for x in (overhead.min(), overhead.max())],
            "overhead_pct_without_progress":
                100.0 * (med["hvdscale_no_progress"] / med["minimal"] - 1),
            "progress_ratio": med["hvdscale"] / med["hvdscale_no_progress"],
            "progress_ratio_paired_rounds": float(np.median(progress)),
            "progress_ratio_paired_rounds_iqr": [float(q) for q in np.percentile(progress,
                                                                                  [25, 75])]}


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
