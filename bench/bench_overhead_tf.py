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
rank 0's progress report. (A separate script from bench_overhead.py: one process runs one
framework's Horovod.)
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from emit import emit  # bench/ is on sys.path when a script runs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--block", type=int, default=5)
    ap.add_argument("--json", default="")
    args = ap.parse_args()

    from hvdscale.config import load_config
    from hvdscale.core.threads import resolve_threads, thread_env
    from hvdscale.core.world import init_horovod, make_world
    from hvdscale.strategies.horovod import horovod_env

    cfg = load_config(args.config, ["framework=tf"])
    local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", "1"))
    intra, inter = resolve_threads(cfg.threads.intra_op, cfg.threads.inter_op, local)
    os.environ.update(thread_env(intra, cfg.threads.mpi_yield, local))
    from hvdscale.frameworks import tf as fw

    fw.set_threads(intra, inter)
    hvd = init_horovod(horovod_env(cfg.strategy.horovod), "tf")
    import tensorflow as tf

    from hvdscale.core.data import BatchPlan, load_corpus
    from hvdscale.core.meter import StepMeter
    from hvdscale.core.progress import ProgressReport
    from hvdscale.core.supervise import StepWatchdog
    from hvdscale.models.tf import build_model
    from hvdscale.strategies.horovod import HorovodTF

    world = make_world(True, "tf")
    rank = hvd.rank()
    corpus = load_corpus(cfg.data, cfg.model.kind, cfg.model.src_vocab, cfg.model.tgt_vocab,
                         rank, hvd.size())
    batch = next(BatchPlan(corpus, cfg.data, cfg.model.kind, cfg.data.batch_size,
                           rank).batches())
    m = cfg.model

    # hvdscale's path: adapter + HorovodTF + meter + watchdog + progress, as in runner.py.
    adapter = fw.make_adapter(m, cfg.optim, m.src_vocab, m.tgt_vocab)
    strategy = HorovodTF(cfg.strategy.horovod)
    strategy.setup(adapter)
    meter = StepMeter(0)
    watchdog = StepWatchdog(cfg.measure.step_timeout_s, rank)
    progress = ProgressReport()

    def hvdscale_step(step: int) -> None:
        watchdog.start_step(step)
        meter.start_step()
        loss = strategy.step(batch)
        meter.end_step(step, batch.words, batch.loss_tokens, batch.padded_tokens,
                       batch.sentences, loss)
        watchdog.end_step()
        progress.step(step)

    # The minimal hand-written loop.
    model = build_model(m.kind, m.rnn_impl, m.src_vocab, m.tgt_vocab, m.embed_dim,
                        m.hidden_size, m.encoder_layers, m.decoder_layers, m.bidirectional,
                        m.attention, m.seed)
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

    times: dict[str, list[float]] = {"hvdscale": [], "minimal": []}
    load_before = os.getloadavg()
    for _ in range(3):  # warm-up (and trace) both
        hvdscale_step(0)
        minimal_step(0)
    for r in range(args.rounds):
        order = [("hvdscale", hvdscale_step), ("minimal", minimal_step)]
        if r % 2:
            order.reverse()
        for name, fn in order:
            world.barrier()
            for i in range(args.block):
                t = time.perf_counter()
                fn(i)
                times[name].append(time.perf_counter() - t)
    watchdog.stop()
    mats = {k: np.max(np.array(world.allgather(v)), axis=0) for k, v in times.items()}
    if rank == 0:
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


if __name__ == "__main__":
    sys.exit(main())
