"""TensorFlow: K steps on N ranks equal one TF process on the union of the ranks' batches.

Batches are deliberately uneven (strong scaling with an odd global batch, long-tailed lengths),
so per-rank token counts differ. Exactness is judged on the parameter change (parameters minus
the initial ones), which the N(0,1) initialisation would otherwise drown, and a negative control
(naive averaging of per-rank mean losses) must miss the tolerance by far, so the tolerance is
known to be tight enough to see a wrong weighting.
"""

from __future__ import annotations

import numpy as np
import pytest

from hvdscale.config import load_config
from hvdscale.core.batching.schedule import build_schedule, local_summary, make_schedule
from hvdscale.core.data import (
    BatchPlan,
    concat_batches,
    load_corpus,
    make_plan,
    per_rank_batch_size,
)
from hvdscale.core.world import is_gloo_launch
from hvdscale.frameworks import load_framework
from hvdscale.strategies import make_strategy

K_STEPS = 3
REL_TOL = 1e-4
"""On parameter changes: float32 rounding of the summed gradients gives ~1e-6 here; the naive
per-rank mean (the negative control) is off by more than 1e-2."""

tf_fw = load_framework("tf")


def _cfg(strategy: str, *extra: str):
    return load_config(None, [
        "framework=tf", "model.kind=nmt", "model.embed_dim=16", "model.hidden_size=24",
        "model.src_vocab=50", "model.tgt_vocab=60", "model.attention=true",
        "data.batch_size=7", "data.scaling=strong", "data.synthetic.max_len=12",
        "data.synthetic.mean_len=6", "data.synthetic.sentences_per_rank=64",
        "optim.name=momentum", "optim.lr=0.3", f"strategy.name={strategy}", *extra])


def _adapter(cfg):
    return tf_fw.make_adapter(cfg.model, cfg.optim, cfg.model.src_vocab, cfg.model.tgt_vocab)


def _plan(cfg, widx: int, nworkers: int) -> BatchPlan:
    corpus = load_corpus(cfg.data, cfg.model.kind, cfg.model.src_vocab, cfg.model.tgt_vocab,
                         widx, nworkers)
    if cfg.measure.epochs:
        return make_plan(corpus, cfg.data, cfg.model.kind, widx, nworkers)
    return BatchPlan(corpus, cfg.data, cfg.model.kind,
                     per_rank_batch_size(cfg.data, widx, nworkers), widx)


def _initial(cfg) -> np.ndarray:
    return _adapter(cfg).params_buffer().copy()


def _distributed(cfg, world):
    """Train on this rank; returns (params after, strategy)."""
    strategy = make_strategy(cfg.strategy, "tf", world)
    widx = getattr(strategy, "worker_index", world.rank)
    nworkers = getattr(strategy, "num_workers", world.size)
    adapter = _adapter(cfg)
    strategy.setup(adapter)
    plan = _plan(cfg, widx, nworkers) if strategy.computes else None
    if cfg.measure.epochs:
        _, stream = make_schedule(cfg.measure, plan, world)
        for batch in stream:
            strategy.step(batch)
    else:
        batches = plan.batches() if plan is not None else None
        for _ in range(K_STEPS):
            strategy.step(next(batches) if batches is not None else None)
    strategy.finish()
    return adapter.params_buffer().copy(), strategy


def _worker_steps(cfg, nworkers: int) -> list[list]:
    """Per step, the batch (or None) of every worker, rebuilt from the agreed schedule."""
    plans = [_plan(cfg, w, nworkers) for w in range(nworkers)]
    if cfg.measure.epochs:
        gathered = [local_summary(cfg.measure, p, False) for p in plans]
        streams = [list(build_schedule(cfg.measure, p, gathered, False)[1]) for p in plans]
        return [list(step) for step in zip(*streams, strict=True)]
    its = [p.batches() for p in plans]
    return [[next(i) for i in its] for _ in range(K_STEPS)]


def _reference(cfg, steps: list[list], naive: bool = False) -> np.ndarray:
    """One process: per step one update on the union of the batches (``naive``: the mean of
    per-rank mean-loss gradients instead, the wrong weighting with uneven batches)."""
    adapter = _adapter(cfg)
    for parts in steps:
        parts = [b for b in parts if b is not None]
        if not parts:
            continue
        adapter.zero_grad()
        if naive:
            for b in parts:  # gradients accumulate: the mean of per-rank mean-loss gradients
                adapter.forward_backward(b, 1.0 / (len(parts) * b.loss_tokens))
        else:
            union = concat_batches(parts)
            adapter.forward_backward(union, 1.0 / union.loss_tokens)
        adapter.step()
    return adapter.params_buffer().copy()


def _rel_change(got: np.ndarray, ref: np.ndarray, init: np.ndarray) -> float:
    d_got, d_ref = got.astype(np.float64) - init, ref.astype(np.float64) - init
    return float(np.linalg.norm(d_got - d_ref) / np.linalg.norm(d_ref))


def _check_exact(cfg, params: np.ndarray, nworkers: int) -> None:
    steps = _worker_steps(cfg, nworkers)
    init = _initial(cfg)
    ref = _reference(cfg, steps)
    err = _rel_change(params, ref, init)
    assert err < REL_TOL, f"parameter change differs from one process by {err:.2e}"
    if nworkers == 1:  # a dedicated server's single worker: nothing is uneven, nothing to weigh
        return
    sizes = {tuple(b.loss_tokens for b in s if b is not None) for s in steps}
    assert any(len(set(s)) > 1 for s in sizes), "test data should be uneven across ranks"
    naive = _rel_change(_reference(cfg, steps, naive=True), ref, init)
    assert naive > 100 * REL_TOL, f"negative control too close ({naive:.2e}): tolerance too loose"


def _identical_replicas(world, params: np.ndarray) -> None:
    everyone = world.allgather(params)
    for p in everyone[1:]:
        assert np.array_equal(p, everyone[0]), "replicas differ"


@pytest.mark.parametrize("extra", [
    ("strategy.horovod.op=sum",),
    ("strategy.horovod.op=average", "optim.name=adam", "optim.lr=0.01"),
    ("strategy.horovod.embedding_grads=gathered",),
    ("strategy.horovod.overlap=after-backward",),
])
def test_tf_horovod_equals_one_process_on_union(extra, hvd, comm_world) -> None:
    cfg = _cfg("horovod", *extra)
    params, _ = _distributed(cfg, comm_world)
    _identical_replicas(comm_world, params)
    _check_exact(cfg, params, comm_world.size)


@pytest.mark.np3
@pytest.mark.parametrize("strategy", ["horovod", "ps"])
def test_tf_whole_epoch_with_idle_steps_is_exact(strategy, hvd, comm_world) -> None:
    if strategy == "ps" and is_gloo_launch():
        pytest.skip("the parameter server needs an MPI launch")
    cfg = _cfg(strategy, "data.bucketing.enabled=true", "data.bucketing.boundaries=[4,7,10]",
               "data.synthetic.max_len=14", "data.synthetic.sentences_per_rank=40",
               "measure.epochs=1", "measure.warmup_steps=0")
    params, strategy_obj = _distributed(cfg, comm_world)
    steps = _worker_steps(cfg, strategy_obj.num_workers if strategy == "ps" else comm_world.size)
    assert any(None in s for s in steps), "some rank should run out of batches (idle steps)"
    _identical_replicas(comm_world, params)
    _check_exact(cfg, params, comm_world.size)


ps_cases = [("colocated", 1), ("colocated", 2), ("dedicated", 1)]


@pytest.mark.np3
@pytest.mark.skipif(is_gloo_launch(), reason="the parameter server needs an MPI launch")
@pytest.mark.parametrize("placement,servers", ps_cases)
def test_tf_ps_equals_one_process(placement, servers, hvd, comm_world) -> None:
    if placement == "dedicated" and servers >= comm_world.size:
        pytest.skip("no worker left")
    cfg = _cfg("ps", f"strategy.ps.placement={placement}", f"strategy.ps.num_servers={servers}")
    params, strategy = _distributed(cfg, comm_world)
    everyone = comm_world.allgather((strategy.computes, params))
    worker_params = [p for computes, p in everyone if computes]
    assert len(worker_params) == strategy.num_workers
    for p in worker_params:
        assert np.array_equal(p, worker_params[0])
    _check_exact(cfg, worker_params[0], strategy.num_workers)


def test_tf_independent_replicas_diverge(comm_world) -> None:
    params, _ = _distributed(_cfg("independent"), comm_world)
    everyone = comm_world.allgather(params)
    assert not np.array_equal(everyone[0], everyone[1])
