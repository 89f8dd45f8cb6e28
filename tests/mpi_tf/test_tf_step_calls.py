"""TensorFlow: one training step is ONE graph call, with no eager collective around it.

Counted on the real step: every top-level (eager) call of a ``tf.function`` and every Horovod
collective issued eagerly (outside a traced function) while ``strategy.step`` runs. A step that
allreduces the token count eagerly, or zeroes, computes and applies in separate graph calls,
fails here. Each case is also checked to train (parameters change) so a step that does nothing
cannot pass.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.eager.polymorphic_function import polymorphic_function as pf

from hvdscale.frameworks import load_framework
from hvdscale.strategies import make_strategy
from tests.exactness import adapter, config, plan

COLLECTIVES = ("allreduce", "grouped_allreduce", "allgather", "broadcast", "alltoall")


@contextlib.contextmanager
def counting(hvd_module: object) -> Iterator[dict[str, int]]:
    """Count eager graph calls and eager Horovod collectives while the block runs."""
    counts = {"graph_calls": 0, "eager_collectives": 0}
    orig_call = pf.Function.__call__
    orig = {n: getattr(hvd_module, n) for n in COLLECTIVES}

    def call(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if tf.executing_eagerly():  # a nested call while tracing is part of the outer graph
            counts["graph_calls"] += 1
        return orig_call(self, *args, **kwargs)

    def wrap(fn):  # type: ignore[no-untyped-def]
        def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
            if tf.executing_eagerly():
                counts["eager_collectives"] += 1
            return fn(*args, **kwargs)
        return counted

    pf.Function.__call__ = call
    for n, fn in orig.items():
        setattr(hvd_module, n, wrap(fn))
    try:
        yield counts
    finally:
        pf.Function.__call__ = orig_call
        for n, fn in orig.items():
            setattr(hvd_module, n, fn)


def _setup(comm_world, strategy: str, *extra: str):  # type: ignore[no-untyped-def]
    cfg = config("tf", strategy, *extra)
    fw = load_framework("tf")
    strat = make_strategy(cfg.strategy, comm_world, fw.HorovodStrategy)
    mine = adapter(cfg)
    strat.setup(mine)
    batches = plan(cfg, comm_world.rank, comm_world.size).batches()
    return strat, mine, batches


def _check_lean(strat, mine, batches, hvd, idle_rank: int | None = None) -> None:  # type: ignore[no-untyped-def]
    strat.step(next(batches))  # traces the step (tracing calls are not counted below)
    before = mine.params_buffer().copy()
    steps = 3
    with counting(hvd) as counts:
        for i in range(steps):
            idle = i == 1 and hvd.rank() == idle_rank  # a rank out of batches (epoch mode)
            strat.step(None if idle else next(batches))
    assert counts == {"graph_calls": steps, "eager_collectives": 0}, counts
    assert not np.array_equal(before, mine.params_buffer())


@pytest.mark.parametrize("extra", [
    (),
    ("strategy.horovod.overlap=after-backward",),
    ("strategy.horovod.compression=fp16", "strategy.horovod.embedding_grads=gathered"),
    ("strategy.horovod.overlap=after-backward", "strategy.horovod.compression=fp16",
     "strategy.horovod.num_groups=2"),
])
def test_tf_horovod_step_is_one_graph_call(extra, hvd, comm_world) -> None:
    strat, mine, batches = _setup(comm_world, "horovod", *extra)
    _check_lean(strat, mine, batches, hvd, idle_rank=comm_world.size - 1)


def test_tf_horovod_step_without_any_batch_changes_nothing(hvd, comm_world) -> None:
    """Every rank idle (the token count is 0 everywhere): one graph call, no update, not
    even of the optimizer's state (momentum would still move the parameters)."""
    strat, mine, batches = _setup(comm_world, "horovod")
    strat.step(next(batches))
    before = mine.params_buffer().copy()
    with counting(hvd) as counts:
        assert strat.step(None) == 0.0
    assert counts == {"graph_calls": 1, "eager_collectives": 0}, counts
    strat.step(next(batches))
    after_one = mine.params_buffer().copy()
    fresh, mine2, batches2 = _setup(comm_world, "horovod")
    fresh.step(next(batches2))
    fresh.step(next(batches2))
    np.testing.assert_array_equal(after_one, mine2.params_buffer())
    assert not np.array_equal(before, after_one)


def test_tf_independent_step_is_one_graph_call(hvd, comm_world) -> None:
    strat, mine, batches = _setup(comm_world, "independent")
    _check_lean(strat, mine, batches, hvd)
