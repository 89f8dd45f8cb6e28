"""``data.bucketing.mode=global`` on 2 and 3 ranks equals one process on the same global batches.

Every rank derives the job's global batches (one length bucket each, to a global token budget)
from the whole corpus and trains on its part of each; parts differ in sentence count and length,
a bucket's last global batch is small, and a rank whose part is empty takes part in the step
with no batch. One epoch of that must equal one process that trains, per step, on the whole
global batch. Exactness is judged on the parameter CHANGES (parameters minus their initial
values): the parameters themselves are dominated by the initialisation, which would hide an
error in the update; the naive mean of the ranks' parts must miss by far (negative control).
The framework is the session's (``HVDSCALE_TEST_FRAMEWORK``), so the same tests serve both
frameworks (tests/mpi_tf/test_tf_global_bucketing.py runs them with TF).
"""

from __future__ import annotations

import numpy as np
import pytest

from hvdscale.config import load_config
from hvdscale.core.batching import GlobalPlan, make_plan, make_schedule
from hvdscale.core.world import is_gloo_launch
from hvdscale.corpora.corpus import load_corpus
from hvdscale.frameworks import load_framework
from hvdscale.strategies import make_strategy
from tests.exactness import judge, reference, worker_steps
from tests.mpi_harness import FRAMEWORK

REL_TOL = 1e-5  # relative L2 error of the parameter change (measured: below 4e-7)
pytestmark = pytest.mark.np3


def _cfg(strategy: str, *extra: str):
    return load_config(None, [
        f"framework={FRAMEWORK}", "model.kind=nmt", "model.embed_dim=16", "model.hidden_size=24",
        "model.src_vocab=50", "model.tgt_vocab=60", "model.attention=true",
        "data.scaling=strong", "data.bucketing.enabled=true", "data.bucketing.mode=global",
        "data.bucketing.boundaries=[4,7,10]", "data.bucketing.tokens_per_batch=100",
        "data.synthetic.max_len=14", "data.synthetic.mean_len=6",
        "data.synthetic.sentences_per_rank=30", "measure.epochs=1", "measure.warmup_steps=0",
        "optim.name=momentum", "optim.lr=0.3", f"strategy.name={strategy}", *extra])


def _adapter(cfg):
    return load_framework(FRAMEWORK).make_adapter(cfg.model, cfg.optim, cfg.model.src_vocab,
                                                  cfg.model.tgt_vocab)


def _plan(cfg, widx: int, nworkers: int) -> GlobalPlan:
    corpus = load_corpus(cfg.data, cfg.model.kind, cfg.model.src_vocab, cfg.model.tgt_vocab,
                         widx, nworkers)
    plan = make_plan(corpus, cfg.data, cfg.model.kind, widx, nworkers)
    assert isinstance(plan, GlobalPlan)
    return plan


def _distributed(cfg, world):
    """Train the epoch on this rank; returns (params, strategy, schedule, steps without batch)."""
    strategy = make_strategy(cfg.strategy, world, load_framework(FRAMEWORK).HorovodStrategy)
    widx = getattr(strategy, "worker_index", world.rank)
    nworkers = getattr(strategy, "num_workers", world.size)
    plan = _plan(cfg, widx, nworkers) if strategy.computes else None
    adapter = _adapter(cfg)
    strategy.setup(adapter)
    schedule, stream = make_schedule(cfg.measure, plan, world, cfg.data.bucketing.mode)
    without = 0
    for batch in stream:
        without += batch is None
        strategy.step(batch)
    strategy.finish()
    return adapter.params_buffer().copy(), strategy, schedule, without


def _reference(cfg, nworkers: int) -> tuple[np.ndarray, np.ndarray]:
    """(initial params, params after one process trained on every whole global batch)."""
    adapter = _adapter(cfg)
    init = adapter.params_buffer().astype(np.float64)
    plan = _plan(cfg, 0, nworkers)
    idle = uneven = False
    for j, gidx in enumerate(plan.global_batches(0)):
        sizes = [len(p) for p in plan.parts(gidx, j)]
        idle |= 0 in sizes
        uneven |= len(set(sizes)) > 1
        batch = plan.make(gidx)  # the whole global batch, collated once: no split involved
        adapter.zero_grad()
        adapter.forward_backward(batch, 1.0 / batch.loss_tokens)
        adapter.step()
    if nworkers > 1:
        assert uneven, "test data: parts should differ in size at some step"
        assert idle, "test data: some rank should have an empty part at some step"
    return init, adapter.params_buffer().astype(np.float64)


def _exact(cfg, params: np.ndarray, nworkers: int) -> None:
    """Parameter changes equal one process on the whole global batches; the naive mean of the
    ranks' parts (the negative control, ``tests.exactness``) misses by far."""
    init, ref = _reference(cfg, nworkers)
    naive = reference(cfg, worker_steps(cfg, nworkers), naive=True) if nworkers > 1 else None
    judge(params, init, ref, naive, REL_TOL)


def _check_schedule(schedule, without: int, strategy, world, nworkers: int) -> None:
    assert schedule.mode == "global" and schedule.steps == len(
        _plan(_cfg("horovod"), 0, nworkers).global_batches(0))
    mine = schedule.batches_per_rank[world.rank]
    assert without == (schedule.steps - mine if strategy.computes else schedule.steps)


def test_horovod_global_epoch_equals_one_process_on_global_batches(hvd, comm_world) -> None:
    # Sum op and momentum; the average op and Adam are exact with uneven batches already
    # (tests/mpi/test_bucketing.py): global mode changes only which batches ranks hold.
    cfg = _cfg("horovod")
    params, strategy, schedule, without = _distributed(cfg, comm_world)
    _check_schedule(schedule, without, strategy, comm_world, comm_world.size)
    everyone = comm_world.allgather(params)
    for p in everyone[1:]:
        assert np.array_equal(p, everyone[0]), "replicas differ after global-mode steps"
    _exact(cfg, params, comm_world.size)


# Colocated (every rank works) and dedicated (a server that holds no batch, the split over the
# remaining workers); sharding over several servers is the same here as in per_rank mode.
ps_cases = [("colocated", 1), ("dedicated", 1)]


@pytest.mark.skipif(is_gloo_launch(), reason="the parameter server needs an MPI launch")
@pytest.mark.parametrize("placement,servers", ps_cases)
def test_ps_global_epoch_equals_one_process_on_global_batches(placement, servers, hvd,
                                                              comm_world) -> None:
    if placement == "dedicated" and servers >= comm_world.size:
        pytest.skip("no worker left")
    cfg = _cfg("ps", f"strategy.ps.placement={placement}", f"strategy.ps.num_servers={servers}")
    params, strategy, schedule, without = _distributed(cfg, comm_world)
    _check_schedule(schedule, without, strategy, comm_world, strategy.num_workers)
    everyone = comm_world.allgather((strategy.computes, params))
    worker_params = [p for computes, p in everyone if computes]
    assert len(worker_params) == strategy.num_workers
    for p in worker_params:
        assert np.array_equal(p, worker_params[0])
    _exact(cfg, worker_params[0], strategy.num_workers)
