"""Uneven bucketed batches: exact token-weighted updates for every strategy, and no hang.

Each rank trains one whole epoch of its own length-bucketed batches (``measure.epochs=1``).
Strong scaling splits an odd global batch (7 = 4 + 3 on two ranks), so at a step the ranks hold
different numbers of sentences of different lengths, and they hold different numbers of
batches. The ranks agree on the step count (``hvdscale.core.batching``); a rank out of batches
takes part with no batch. After the epoch every replica must equal one process that trained on the
union of each step's batches, within 1e-5 relative. A hang fails the test through the per-test
timeout of conftest.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from hvdscale.config import load_config
from hvdscale.core.batching import (
    BatchPlan,
    build_schedule,
    local_summary,
    make_plan,
    make_schedule,
)
from hvdscale.core.data import concat_batches, load_corpus
from hvdscale.core.world import is_gloo_launch
from hvdscale.frameworks.torch import HorovodStrategy, TorchAdapter
from hvdscale.strategies import make_strategy

REL_TOL = 1e-5
pytestmark = pytest.mark.np3


def _cfg(strategy: str, *extra: str):
    return load_config(None, [
        "model.kind=nmt", "model.embed_dim=16", "model.hidden_size=24", "model.src_vocab=50",
        "model.tgt_vocab=60", "model.attention=true", "data.batch_size=7",
        "data.scaling=strong", "data.bucketing.enabled=true", "data.bucketing.boundaries=[4,7,10]",
        "data.synthetic.max_len=14", "data.synthetic.mean_len=6",
        "data.synthetic.sentences_per_rank=40", "measure.epochs=1", "measure.warmup_steps=0",
        "optim.name=momentum", "optim.lr=0.3", f"strategy.name={strategy}", *extra])


def _plan(cfg, widx: int, nworkers: int) -> BatchPlan:
    corpus = load_corpus(cfg.data, cfg.model.kind, cfg.model.src_vocab, cfg.model.tgt_vocab,
                         widx, nworkers)
    return make_plan(corpus, cfg.data, cfg.model.kind, widx, nworkers)


def _distributed(cfg, world) -> tuple[np.ndarray, object, object, int]:
    """Train the epoch on this rank; returns (params, strategy, schedule, steps without batch)."""
    strategy = make_strategy(cfg.strategy, world, HorovodStrategy)
    widx = getattr(strategy, "worker_index", world.rank)
    nworkers = getattr(strategy, "num_workers", world.size)
    plan = _plan(cfg, widx, nworkers) if strategy.computes else None
    adapter = TorchAdapter(cfg.model, cfg.optim, cfg.model.src_vocab, cfg.model.tgt_vocab)
    strategy.setup(adapter)
    schedule, stream = make_schedule(cfg.measure, plan, world, cfg.data.bucketing.mode)
    without = 0
    for batch in stream:
        without += batch is None
        strategy.step(batch)
    strategy.finish()
    return adapter.params_buffer().copy(), strategy, schedule, without


def _reference(cfg, nworkers: int, independent_worker: int | None = None) -> np.ndarray:
    """One process: per step, one update on the union of the batches the workers hold.

    Every worker's stream is rebuilt here from the same schedule the ranks agreed on.
    """
    adapter = TorchAdapter(cfg.model, cfg.optim, cfg.model.src_vocab, cfg.model.tgt_vocab)
    mode = cfg.data.bucketing.mode
    align = mode == "aligned"
    plans = [_plan(cfg, w, nworkers) for w in range(nworkers)]
    gathered = [local_summary(cfg.measure, p, mode) for p in plans]
    built = [build_schedule(cfg.measure, p, gathered, mode) for p in plans]
    streams = [list(stream) for _, stream in built]
    if independent_worker is not None:
        streams = [streams[independent_worker]]
    uneven_step = idle_step = False
    for step in zip(*streams, strict=True):
        parts = [b for b in step if b is not None]
        idle_step |= len(parts) < len(step)
        uneven_step |= len({(b.sentences, b.src.shape[1]) for b in parts}) > 1
        if not parts:
            continue
        union = concat_batches(parts)
        adapter.zero_grad()
        adapter.forward_backward(union, 1.0 / union.loss_tokens)
        adapter.step()
    if nworkers > 1 and independent_worker is None:
        assert idle_step, "test data: some rank should run out of batches"
        assert uneven_step, "test data: sentence counts and lengths should differ at a step"
        if not align:
            counts = built[0][0].batches_per_rank
            assert len(set(counts)) > 1, "test data: batch counts should differ by rank"
    return adapter.params_buffer().copy()


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b.astype(np.float64)))


def _check_schedule(schedule, without: int, strategy, world) -> None:
    counts = schedule.batches_per_rank
    most = max(c for c in counts if c is not None)
    # Aligned buckets: each bucket gets the most batches any rank holds in it, so more steps.
    assert schedule.steps >= most if schedule.aligned else schedule.steps == most
    mine = counts[world.rank]
    assert without == (schedule.steps - mine if strategy.computes else schedule.steps)
    if sum(c is not None for c in counts) > 1:
        assert any(c is not None and c < schedule.steps for c in counts), "a rank should idle"


@pytest.mark.parametrize("extra", [
    (), ("strategy.horovod.op=average", "optim.name=adam", "optim.lr=0.01"),
    ("data.bucketing.mode=aligned", "data.bucketing.tokens_per_batch=40")],
    ids=["sum-momentum", "average-adam", "aligned-token-budget"])
def test_horovod_uneven_epoch_equals_one_process_on_union(extra, hvd, comm_world) -> None:
    cfg = _cfg("horovod", *extra)
    params, strategy, schedule, without = _distributed(cfg, comm_world)
    _check_schedule(schedule, without, strategy, comm_world)
    everyone = comm_world.allgather(params)
    for p in everyone[1:]:
        assert np.array_equal(p, everyone[0]), "replicas differ after uneven horovod steps"
    assert _rel(params, _reference(cfg, comm_world.size)) < REL_TOL


ps_cases = [("colocated", 1, ()), ("colocated", 2, ()), ("dedicated", 1, ()),
            ("colocated", 1, ("data.bucketing.mode=aligned",))]


@pytest.mark.skipif(is_gloo_launch(), reason="the parameter server needs an MPI launch")
@pytest.mark.parametrize("placement,servers,extra", ps_cases)
def test_ps_uneven_epoch_equals_one_process_on_union(placement, servers, extra, hvd,
                                                     comm_world) -> None:
    if placement == "dedicated" and servers >= comm_world.size:
        pytest.skip("no worker left")
    cfg = _cfg("ps", f"strategy.ps.placement={placement}", f"strategy.ps.num_servers={servers}",
               *extra)
    params, strategy, schedule, without = _distributed(cfg, comm_world)
    _check_schedule(schedule, without, strategy, comm_world)
    everyone = comm_world.allgather((strategy.computes, params))
    worker_params = [p for computes, p in everyone if computes]
    assert len(worker_params) == strategy.num_workers
    for p in worker_params:
        assert np.array_equal(p, worker_params[0])
    assert _rel(worker_params[0], _reference(cfg, strategy.num_workers)) < REL_TOL
    if placement == "colocated":  # the same function as horovod on the same data
        hv, *_ = _distributed(_cfg("horovod", *extra), comm_world)
        assert _rel(params, hv) < REL_TOL


def test_independent_uneven_epoch_trains_each_replica_on_its_own(comm_world) -> None:
    cfg = _cfg("independent")
    params, strategy, schedule, without = _distributed(cfg, comm_world)
    _check_schedule(schedule, without, strategy, comm_world)
    ref = _reference(cfg, comm_world.size, independent_worker=comm_world.rank)
    assert _rel(params, ref) < REL_TOL
