"""Harness overhead on the TensorFlow path: hvdscale's horovod step vs a minimal hand-written
``hvd.DistributedGradientTape`` loop.

Run under ``mpirun -np 2 python bench/bench_overhead_tf.py``. Both loops train the same TF model
(hvdscale.models.tf, same config and seed) on the same batch per rank; they alternate in blocks
(order swapped every round) so machine noise hits both alike, and the ratio of median step
times is reported, a step's time being the slower rank's.

The minimal loop is what a Horovod user writes by hand: a ``tf.function`` with mean loss,
``hvd.DistributedGradientTape(tape)`` (op Average) and an SGD update. hvdscale's step adds what
exactness and measurement need: the global token-count allreduce, the summed loss scaled by
1/global tokens, gradients kept between backward and update, the meter, the step watchdog and
rank 0's progress report. hvdscale's side is the run's own step loop
(``hvdscale.train.loop.train_loop``, timed by bench/harness_timing.py); each of its blocks
starts with one untimed step that opens the window (a barrier, as in a run). (A separate
script from bench_overhead.py: one process runs one framework's Horovod.)
"""

from __future__ import annotations

import argparse
import os
import sys
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
    args = ap.parse_args()

    from hvdscale.config import load_config

    cfg = load_config(args.config, ["framework=tf"])
    hvd = _start(cfg)
    parts, batch = _harness(cfg, hvd)
    minimal_step = _minimal_loop(cfg, hvd, batch)
    load_before = os.getloadavg()
    warm_up_loop(parts, batch, 3)  # warm-up (and trace) both
    time_steps(minimal_step, 3)
    times: dict[str, list[float]] = {"hvdscale": [], "minimal": []}
    for r in range(args.rounds):
        order = ["hvdscale", "minimal"]
        if r % 2:
            order.reverse()
        for name in order:
            if name == "hvdscale":
                times[name] += time_train_loop(parts, batch, args.block)[0]
            else:
                parts.world.barrier()
                times[name] += time_steps(minimal_step, args.block)
    mats = {k: np.max(np.array(parts.world.allgather(v)), axis=0) for k, v in times.items()}
    if hvd.rank() == 0:
        med = {k: float(np.median(v)) for k, v in mats.items()}
        per_round = {k: np.median(v.reshape(args.rounds, args.block), axis=1)
                     for k, v in mats.items()}
        paired = per_round["hvdscale"] / per_round["minimal"]
        emit({"config": args.config, "framework": "tf", "ranks": hvd.size(),
              "steps_each": len(mats["minimal"]), "rounds": args.rounds, "block": args.block,
              "loadavg_before": list(load_before), "loadavg_after": list(os.getloadavg()),
              "median_step_s": med, "ratio": med["hvdscale"] / med["minimal"],
              "overhead_pct": 100.0 * (med["hvdscale"] / med["minimal"] - 1),
              "overhead_pct_paired_rounds": 100.0 * (float(np.median(paired)) - 1),
              "paired_rounds_iqr": [float(q) for q in np.percentile(paired, [25, 75])]},
             args.json)
    return 0


def _start(cfg: Any) -> Any:
    """Thread settings, then Horovod (its TensorFlow integration); returns ``horovod.tensorflow``.

    TensorFlow's thread pools are sized before Horovod starts: they are fixed by its first op,
    and Horovod's collectives run ops."""
    from hvdscale.core.threads import resolve_threads, thread_env
    from hvdscale.core.world import init_horovod
    from hvdscale.strategies.horovod import horovod_env

    local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", "1"))
    intra, inter = resolve_threads(cfg.threads.intra_op, cfg.threads.inter_op, local)
    os.environ.update(thread_env(intra, cfg.threads.mpi_yield, local))
    from hvdscale.frameworks import tf as fw

    fw.set_threads(intra, inter)
    return init_horovod(horovod_env(cfg.strategy.horovod), fw.HOROVOD.module)


def _harness(cfg: Any, hvd: Any) -> tuple[Any, Any]:
    """hvdscale's path, as a run builds it: adapter, HorovodTF strategy, world; the loop's
    parts (no progress report, as on ranks other than 0) and this rank's first batch."""
    from hvdscale.core.batching import BatchPlan
    from hvdscale.core.data import load_corpus
    from hvdscale.core.world import make_world
    from hvdscale.frameworks import tf as fw
    from hvdscale.frameworks.tf import HorovodTF
    from hvdscale.train.loop import LoopParts

    world = make_world(True, fw.HOROVOD)
    rank = hvd.rank()
    corpus = load_corpus(cfg.data, cfg.model.kind, cfg.model.src_vocab, cfg.model.tgt_vocab,
                         rank, hvd.size())
    batch = next(BatchPlan(corpus, cfg.data, cfg.model.kind, cfg.data.batch_size,
                           rank).batches())
    m = cfg.model
    adapter = fw.make_adapter(m, cfg.optim, m.src_vocab, m.tgt_vocab)
    strategy = HorovodTF(cfg.strategy.horovod)
    strategy.setup(adapter)
    return LoopParts(strategy, adapter, world, cfg.measure.step_timeout_s), batch


def _minimal_loop(cfg: Any, hvd: Any, batch: Any) -> Callable[[int], None]:
    """The minimal hand-written loop's step: a ``tf.function`` with mean loss,
    ``hvd.DistributedGradientTape`` and an SGD update."""
    import tensorflow as tf

    from hvdscale.models import ModelSizes
    from hvdscale.models.tf import build_model

    m = cfg.model
    model = build_model(m.kind, m.rnn_impl, ModelSizes.from_config(m, m.src_vocab, m.tgt_vocab),
                        m.seed)
    variables = list(model.trainable_variables)
    hvd.broadcast_variables(variables, root_rank=0)
    lr = cfg.optim.lr
    mat, vec = tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32)

    @tf.function(input_signature=[mat, vec, mat, mat, vec])
    def minimal_train_step(src, src_len, tgt_in, tgt_out, tgt_len):  # type: ignore[no-untyped-def]
        with tf.GradientTape() as tape:
            loss, tokens = model(src, src_len, tgt_in, tgt_out, tgt_len)
            loss = loss / tf.cast(tokens, tf.float32)
        tape = hvd.DistributedGradientTape(tape, op=hvd.Average, sparse_as_dense=True)
        for v, g in zip(variables, tape.gradient(loss, variables), strict=True):
            v.assign_sub(lr * tf.convert_to_tensor(g))
        return loss

    inputs = [np.asarray(a, np.int32) for a in (batch.src, batch.src_len, batch.tgt_in,
                                                 batch.tgt_out, batch.tgt_len)]

    def minimal_step(step: int) -> None:
        float(minimal_train_step(*inputs))

    return minimal_step


if __name__ == "__main__":
    sys.exit(main())
