"""Harness overhead on the TensorFlow path: hvdscale's horovod step vs a minimal hand-written
``hvd.DistributedGradientTape`` loop, and hvdscale's horovod step vs its independent replicas.

Run (about 2 minutes on a quiet machine; the table for BENCHMARKS.md comes from the raw file):

    python -m hvdscale.study.sweep.launcher --np 2 -- \\
        python bench/bench_overhead_tf.py --pairs 16 --json bench/results/overhead_tf_issue24.json
    python bench/bench_overhead_tf.py --render bench/results/overhead_tf_issue24.json

All loops train the same TF model (hvdscale.models.tf, the config's sizes and seed) on the same
batch per rank, with the same threads and ``OMPI_MCA_mpi_yield_when_idle`` (one process runs
them all). A pair is one block of ``--block`` steps of each loop, back to back, the order
rotated every pair so machine noise hits all alike; the pair's ratio is the median step of one
loop's block over the other's, a step's time being the slower rank's. Reported: the median of
the pairs' ratios and their spread (min-max), and the 1-minute load before and after every
block (``quiet`` only if every one is at or below 2.5).

The minimal loop is what a Horovod user writes by hand: one ``tf.function`` per step with mean
loss, ``hvd.DistributedGradientTape(tape)`` (op Average) and an SGD update. hvdscale's side is
the run's own step loop (``hvdscale.train.loop.train_loop``, timed by bench/harness_timing.py)
with the horovod strategy: the token count's allreduce, the summed loss scaled by 1/global
tokens, the meter and the step watchdog on top, all of the step in one graph call. The
independent arm is the same loop with independent replicas (no communication): hvdscale's
horovod/independent throughput ratio at np=2, paired the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from emit import QUIET_LOAD, emit  # bench/ is on sys.path when a script runs
from harness_timing import time_steps, time_train_loop, warm_up_loop

ARMS = ("hvdscale", "minimal", "independent")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--pairs", type=int, default=16, help="alternating pairs (at least 6 for "
                    "a reported figure)")
    ap.add_argument("--block", type=int, default=20, help="steps per loop per pair")
    ap.add_argument("--json", default="", help="write the raw result here")
    ap.add_argument("--render", metavar="RAW.json", help="print the table from a raw file")
    args = ap.parse_args()
    if args.render:
        print(render(json.loads(Path(args.render).read_text())), end="")
        return 0
    if args.pairs < 1 or args.block < 1:
        print("bench_overhead_tf: --pairs and --block must be >= 1", file=sys.stderr)
        return 2

    from hvdscale.config import load_config

    cfg = load_config(args.config, ["framework=tf"])
    hvd = _start(cfg)
    parts, batch = _harness(cfg, hvd, "horovod")
    indep, _ = _harness(cfg, hvd, "independent")
    minimal_step = _minimal_loop(cfg, hvd, batch)
    warm_up_loop(parts, batch, 3)  # warm-up (and trace) every loop
    warm_up_loop(indep, batch, 3)
    time_steps(minimal_step, 3)
    runs = {"hvdscale": lambda: time_train_loop(parts, batch, args.block)[0],
            "independent": lambda: time_train_loop(indep, batch, args.block)[0],
            "minimal": lambda: _barrier_then(parts.world, minimal_step, args.block)}
    times, loads = _pairs(args.pairs, runs)
    # A job's step lasts as long as its slowest rank: the max over ranks per step.
    mats = {k: np.max(np.array(parts.world.allgather(v)), axis=0) for k, v in times.items()}
    if hvd.rank() == 0:
        emit({"config": args.config, "framework": "tf", "ranks": hvd.size(),
              "pairs": args.pairs, "block": args.block,
              "order": [_order(i) for i in range(args.pairs)],
              "block_load_1min": loads, **summarize(mats, args.pairs, args.block)}, args.json)
    return 0


def _order(pair: int) -> list[str]:
    """The loops' order in ``pair``: rotated, so each loop runs first, second and last alike."""
    k = pair % len(ARMS)
    return list(ARMS[k:] + ARMS[:k])


def _barrier_then(world: Any, step: Callable[[int], None], steps: int) -> list[float]:
    world.barrier()  # every rank starts its block together, as train_loop's window does
    return time_steps(step, steps)


def _pairs(pairs: int, runs: dict[str, Callable[[], list[float]]]
           ) -> tuple[dict[str, list[float]], list[list[float]]]:
    """Every loop's block once per pair, in ``_order``; step times per loop and the 1-minute
    load [before, after] of every block, in the order the blocks ran."""
    times: dict[str, list[float]] = {k: [] for k in ARMS}
    loads: list[list[float]] = []
    for p in range(pairs):
        for name in _order(p):
            before = os.getloadavg()[0]
            times[name] += runs[name]()
            loads.append([before, os.getloadavg()[0]])
    return times, loads


def summarize(mats: dict[str, np.ndarray], pairs: int, block: int) -> dict[str, Any]:
    """Median step times, and per pair: hvdscale/minimal (the overhead) and independent/
    hvdscale (horovod's throughput relative to independent replicas), with their spread."""
    per_pair = {k: np.median(v.reshape(pairs, block), axis=1) for k, v in mats.items()}
    over = per_pair["hvdscale"] / per_pair["minimal"]
    scaling = per_pair["independent"] / per_pair["hvdscale"]
    return {"median_step_s": {k: float(np.median(v)) for k, v in mats.items()},
            "pair_median_step_s": {k: [float(x) for x in v] for k, v in per_pair.items()},
            "overhead_ratio_per_pair": [float(x) for x in over],
            "overhead_pct_median": 100.0 * (float(np.median(over)) - 1),
            "overhead_pct_min_max": [100.0 * (float(over.min()) - 1),
                                     100.0 * (float(over.max()) - 1)],
            "horovod_over_independent_per_pair": [float(x) for x in scaling],
            "horovod_over_independent_median": float(np.median(scaling)),
            "horovod_over_independent_min_max": [float(scaling.min()), float(scaling.max())]}


def render(raw: dict[str, Any]) -> str:
    """The markdown table for BENCHMARKS.md, from the raw result alone."""
    loads = [x for b in raw["block_load_1min"] for x in b]
    quiet = all(x <= QUIET_LOAD for x in loads)  # the project's rule, never the file's own
    med = raw["median_step_s"]
    lo, hi = raw["overhead_pct_min_max"]
    slo, shi = raw["horovod_over_independent_min_max"]
    rows = [
        f"| tf, np={raw['ranks']}, {raw['pairs']} pairs x {raw['block']} steps | median | "
        "min-max over pairs |",
        "|:--|--:|--:|",
        f"| step ms: minimal / hvdscale horovod / hvdscale independent | "
        f"{med['minimal'] * 1e3:.2f} / {med['hvdscale'] * 1e3:.2f} / "
        f"{med['independent'] * 1e3:.2f} | |",
        f"| harness overhead (hvdscale / minimal - 1) | {raw['overhead_pct_median']:+.1f} % | "
        f"{lo:+.1f} % .. {hi:+.1f} % |",
        f"| horovod / independent (words/s) | {raw['horovod_over_independent_median']:.3f} | "
        f"{slo:.3f} .. {shi:.3f} |",
        f"| 1-minute load, every block | {'quiet' if quiet else 'not quiet'} | "
        f"{min(loads):.2f} .. {max(loads):.2f} |",
    ]
    return "\n".join(rows) + "\n"


def _start(cfg: Any) -> Any:
    """Thread settings, then Horovod (its TensorFlow integration); returns ``horovod.tensorflow``.

    TensorFlow's thread pools are sized before Horovod starts: they are fixed by its first op,
    and Horovod's collectives run ops. ``OMPI_MCA_mpi_yield_when_idle`` is exported (by
    ``thread_env``) before MPI starts, as a run does."""
    from hvdscale.core.threads import export_threads
    from hvdscale.core.world import init_horovod
    from hvdscale.strategies.horovod import horovod_env

    # As a run does: every launcher's local size; a user's exported mpi_yield kept.
    intra, inter = export_threads(cfg.threads.intra_op, cfg.threads.inter_op,
                                  cfg.threads.mpi_yield)
    from hvdscale.frameworks import tf as fw

    fw.set_threads(intra, inter)
    return init_horovod(horovod_env(cfg.strategy.horovod), fw.HOROVOD.module)


def _harness(cfg: Any, hvd: Any, strategy: str) -> tuple[Any, Any]:
    """hvdscale's path, as a run builds it: adapter, the strategy (``horovod``: HorovodTF;
    ``independent``), world; the loop's parts (no progress report, as on ranks other than 0)
    and this rank's first batch."""
    from hvdscale.core.batching import BatchPlan
    from hvdscale.core.world import make_world
    from hvdscale.corpora.corpus import load_corpus
    from hvdscale.frameworks import tf as fw
    from hvdscale.frameworks.tf import HorovodTF
    from hvdscale.strategies.independent import Independent
    from hvdscale.train.loop import LoopParts

    world = make_world(True, fw.HOROVOD)
    rank = hvd.rank()
    corpus = load_corpus(cfg.data, cfg.model.kind, cfg.model.src_vocab, cfg.model.tgt_vocab,
                         rank, hvd.size())
    batch = next(BatchPlan(corpus, cfg.data, cfg.model.kind, cfg.data.batch_size,
                           rank).batches())
    m = cfg.model
    adapter = fw.make_adapter(m, cfg.optim, m.src_vocab, m.tgt_vocab)
    strat = HorovodTF(cfg.strategy.horovod) if strategy == "horovod" else Independent()
    strat.setup(adapter)
    return LoopParts(strat, adapter, world, cfg.measure.step_timeout_s), batch


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

    tgt_in = batch.tgt_in if batch.tgt_in is not None else np.zeros((0, 0), np.int32)
    inputs = [np.asarray(a, np.int32) for a in (batch.src, batch.src_len, tgt_in,
                                                 batch.tgt_out, batch.tgt_len)]

    def minimal_step(step: int) -> None:
        float(minimal_train_step(*inputs))

    return minimal_step


if __name__ == "__main__":
    sys.exit(main())
