"""Uneven bucketed batches: exact token-weighted updates for every strategy, and no hang.

Each rank trains one whole epoch of its own length-bucketed batches (``measure.epochs=1``).
Strong scaling splits an odd global batch (7 = 4 + 3 on two ranks), so at a step the ranks hold
different numbers of sentences of different lengths, and they hold different numbers of
batches. The ranks agree on the step count (``hvdscale.core.batching``); a rank out of batches
takes part with no batch. After the epoch every replica's parameter CHANGE must equal that of one
process that trained on the union of each step's batches, within 1e-5 relative, and the naive
per-rank mean (the negative control) must miss by far (``tests.exactness``). A hang fails the
test through the per-test timeout of conftest.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from hvdscale.config import load_config
from hvdscale.core.batching import BatchPlan, make_plan, make_schedule
from hvdscale.core.world import is_gloo_launch
from hvdscale.corpora.corpus import load_corpus
from hvdscale.frameworks.torch import HorovodStrategy, TorchAdapter
from hvdscale.strategies import make_strategy
from tests.exactness import adapter, check_exact, reference, rel_change, worker_steps

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
    return adapter.params_buffer().astype(np.float64), strategy, schedule, without


def _init(cfg) -> np.ndarray:
    return adapter(cfg).params_buffer().astype(np.float64)


def _data_checks(cfg, steps: list[list]) -> None:
    """The test data is what the tests claim: some rank runs out of batches, a step's parts
    differ in sentences and length, and (not aligned) ranks hold different batch counts."""
    assert any(None in step for step in steps), "test data: some rank should run out of batches"
    assert any(len({(b.sentences, b.src.shape[1]) for b in step if b is not None}) > 1
               for step in steps), "test data: sentence counts and lengths should differ"
    if cfg.data.bucketing.mode != "aligned":
        counts = [sum(b is not None for b in worker) for worker in zip(*steps, strict=True)]
        assert len(set(counts)) > 1, "test data: batch counts should differ by rank"


def _exact(cfg, params: np.ndarray, nworkers: int) -> None:
    """Parameter changes equal one process on each step's union; the naive mean misses."""
    steps = worker_steps(cfg, nworkers)
    if nworkers > 1:
        _data_checks(cfg, steps)
    check_exact(cfg, params, nworkers, REL_TOL, steps=steps)


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
    _exact(cfg, params, comm_world.size)


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
    _exact(cfg, worker_params[0], strategy.num_workers)
    if placement == "colocated":  # the same function as horovod on the same data
        hv, *_ = _distributed(_cfg("horovod", *extra), comm_world)
        assert rel_change(params, hv, _init(cfg)) < REL_TOL


def test_independent_uneven_epoch_trains_each_replica_on_its_own(comm_world) -> None:
    cfg = _cfg("independent")
    params, strategy, schedule, without = _distributed(cfg, comm_world)
    _check_schedule(schedule, without, strategy, comm_world)
    # Each replica alone: one process on this rank's own stream (no other rank to weigh).
    own = [[step[comm_world.rank]] for step in worker_steps(cfg, comm_world.size)]
    assert rel_change(params, reference(cfg, own), _init(cfg)) < REL_TOL
