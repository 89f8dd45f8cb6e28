"""Horovod's overlap modes are exact: ``hooks`` (allreduce from backward hooks, Horovod's way)
and ``after-backward`` (one allreduce of the flat gradient buffer), with and without grouped
allreduce, give the same parameters as each other and as one process on the union of the
ranks' batches, including steps where a rank has no batch (idle: zero gradient, zero tokens).
"""

from __future__ import annotations

import numpy as np

from hvdscale.core.data import concat_batches
from hvdscale.frameworks.torch import HorovodStrategy, TorchAdapter
from hvdscale.strategies import make_strategy
from tests.exactness import config, plan
from tests.mpi.test_exactness import REL_TOL

K_STEPS = 4
IDLE_STEP = 2  # the last rank has no batch at this step


def _cfg(strategy: str, *extra: str):
    return config("torch", strategy, *extra)


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    """Relative distance of parameters ``a`` from ``b``."""
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _has_batch(step: int, rank: int, size: int) -> bool:
    return not (step == IDLE_STEP and rank == size - 1)


def _train(cfg, world) -> np.ndarray:
    strategy = make_strategy(cfg.strategy, world, HorovodStrategy)
    adapter = TorchAdapter(cfg.model, cfg.optim, cfg.model.src_vocab, cfg.model.tgt_vocab)
    strategy.setup(adapter)
    batches = plan(cfg, world.rank, world.size).batches()
    for k in range(K_STEPS):
        batch = next(batches)
        strategy.step(batch if _has_batch(k, world.rank, world.size) else None)
    strategy.finish()
    return adapter.params_buffer().copy()


def _reference(cfg, size: int) -> np.ndarray:
    adapter = TorchAdapter(cfg.model, cfg.optim, cfg.model.src_vocab, cfg.model.tgt_vocab)
    streams = [plan(cfg, r, size).batches() for r in range(size)]
    for k in range(K_STEPS):
        parts = [next(s) for s in streams]
        union = concat_batches([b for r, b in enumerate(parts) if _has_batch(k, r, size)])
        adapter.zero_grad()
        adapter.forward_backward(union, 1.0 / union.loss_tokens)
        adapter.step()
    return adapter.params_buffer().copy()


def test_overlap_modes_and_groups_are_exact_with_an_idle_rank(hvd, comm_world) -> None:
    results = {}
    for overlap in ("hooks", "after-backward"):
        for groups in (0, 3):
            cfg = _cfg("horovod", f"strategy.horovod.overlap={overlap}",
                       f"strategy.horovod.num_groups={groups}")
            params = _train(cfg, comm_world)
            everyone = comm_world.allgather(params)
            for p in everyone[1:]:
                assert np.array_equal(p, everyone[0]), f"{overlap}/{groups}: replicas differ"
            results[(overlap, groups)] = params
    ref = _reference(_cfg("horovod"), comm_world.size)
    for key, params in results.items():
        assert _rel(params, ref) < REL_TOL, f"{key} differs from one process on the union"
    base = results[("hooks", 0)]
    for key, params in results.items():
        assert _rel(params, base) < REL_TOL, f"{key} differs from hooks"


def test_after_backward_fp16_keeps_replicas_identical(hvd, comm_world) -> None:
    cfg = _cfg("horovod", "strategy.horovod.overlap=after-backward",
               "strategy.horovod.compression=fp16")
    params = _train(cfg, comm_world)
    everyone = comm_world.allgather(params)
    for p in everyone[1:]:
        assert np.array_equal(p, everyone[0])
    assert _rel(params, _reference(cfg, comm_world.size)) < 1e-2
