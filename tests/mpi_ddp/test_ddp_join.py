"""DDP's join context (``strategy.ddp.idle=join``) beside the harness's other machinery: an
evaluation after the ranks joined (one rank evaluates; DDP's forward must not be what it runs,
since DDP keeps issuing a collective per forward once a join context was built), and the step
watchdog, which must leave a joined rank alone while the others still train."""

from __future__ import annotations

import time

import numpy as np
import pytest

from hvdscale.core.batching import make_schedule
from hvdscale.core.supervise import StepWatchdog
from hvdscale.corpora.evalset import make_eval_set
from hvdscale.frameworks.torch.ddp import DDPStrategy
from hvdscale.train.evaluate import Evaluator, eval_loss_sum
from tests.exactness import adapter, config, identical_replicas, plan

EPOCH = ("data.bucketing.enabled=true", "data.bucketing.boundaries=[4,7,10]",
         "data.synthetic.max_len=14", "data.synthetic.sentences_per_rank=40", "measure.epochs=1",
         "measure.warmup_steps=0")
"""One epoch of length-bucketed batches: ranks hold different numbers of batches."""
TIMEOUT = "strategy.ddp.timeout_s=20"
"""A mismatched collective fails in 20 s (gloo's timeout) instead of the default 120 s."""


def _ddp(cfg, world):  # type: ignore[no-untyped-def]
    mine = adapter(cfg)
    strategy = DDPStrategy(cfg.strategy.ddp, world)
    strategy.setup(mine)
    return strategy, mine


def test_evaluation_after_join_matches_and_training_goes_on(comm_world) -> None:
    # sgd: no optimizer state, which join leaves behind on the ranks that joined early.
    cfg = config("torch", "ddp", *EPOCH, "strategy.ddp.idle=join", "optim.name=sgd", TIMEOUT)
    strategy, mine = _ddp(cfg, comm_world)
    # The join count must run where DDP's group communicates (NCCL: the GPU).
    assert strategy.join.tokens is not None
    assert strategy.join.tokens.join_device == mine.device
    p = plan(cfg, comm_world.rank, comm_world.size)
    schedule, stream = make_schedule(cfg.measure, p, comm_world, cfg.data.bucketing.mode)
    strategy.trace_plan(schedule.steps, endless=False)
    for step, batch in enumerate(stream):  # as the runner's loop: every rank leaves at the end
        strategy.before_step(step)
        strategy.step(batch)
    assert len(set(schedule.batches_per_rank)) > 1, "some rank should run out of batches"
    info = strategy.info()["join"]
    assert info["used"] and info["left_at_step"] is not None
    # One rank evaluates (the runner's Evaluator), the others add zeros.
    evalset = make_eval_set(cfg.data, "nmt", cfg.model.src_vocab, cfg.model.tgt_vocab, 8, 32)
    loss, _ = Evaluator(comm_world, mine, evalset, computes=True).evaluate([])
    own = eval_loss_sum(mine, evalset) / evalset.tokens  # every replica is the same model
    assert abs(loss - own) <= 1e-6 * abs(own), (loss, own)
    # Training after the evaluation: DDP's next collectives must pair up on every rank.
    batches = p.batches(first_epoch=1)
    for step in range(2):
        strategy.before_step(schedule.steps + step)
        strategy.step(next(batches))
    strategy.finish()
    identical_replicas(comm_world, mine.params_buffer().astype(np.float64))


@pytest.mark.np3
def test_a_joined_rank_outlasting_the_step_limit_is_not_ended(comm_world) -> None:
    # Rank 0 trains three more steps, pausing between them (outside its own steps, so its own
    # watchdog is content); the others join at step 1 and wait there longer than the limit
    # plus the watchdog's grace. Before the fix their watchdog ended the job.
    cfg = config("torch", "ddp", "strategy.ddp.idle=join", TIMEOUT)
    strategy, _ = _ddp(cfg, comm_world)
    limit = 1.0
    watchdog = StepWatchdog(limit, comm_world.rank, lambda: strategy.phase)
    batches = plan(cfg, comm_world.rank, comm_world.size).batches()
    pause = (limit + StepWatchdog.GRACE_S + 1.0) / 3
    try:
        for step in range(4):
            strategy.before_step(step)
            watchdog.start_step(step)
            strategy.step(next(batches) if comm_world.rank == 0 or step == 0 else None)
            watchdog.end_step()
            if comm_world.rank == 0:
                time.sleep(pause)
        strategy.finish()
    finally:
        watchdog.stop()
    joined = strategy.info()["join"]
    if comm_world.rank != 0:
        assert joined["left_at_step"] == 1
        assert joined["shadowed_s"] > limit + StepWatchdog.GRACE_S, joined
