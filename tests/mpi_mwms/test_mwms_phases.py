"""What an MWMS rank tells the step watchdog (``strategy.phase``) and what it counts as its own
compute: a step is one graph call that computes and all-reduces, so inside it the rank is
``overlapped`` (the grace of a waiting rank), and ``compute`` again once it returns; the graph
calls' seconds, and only theirs, go to the adapter's ``compute_s``."""

from __future__ import annotations

import time

from hvdscale.frameworks.tf.mwms import MWMSTF
from tests.exactness import adapter, config, plan


def test_the_graph_call_is_overlapped_and_counted_as_compute(comm_world) -> None:
    cfg = config("tf", "mwms")
    mine = adapter(cfg)
    strategy = MWMSTF(cfg.strategy.mwms, comm_world)
    strategy.setup(mine)
    train, seen, inner = strategy._train, [], []

    def observed(*args):  # type: ignore[no-untyped-def]
        seen.append(strategy.phase)
        t0 = time.perf_counter()
        try:
            return train(*args)
        finally:
            inner.append(time.perf_counter() - t0)

    strategy._train = observed
    batches = plan(cfg, comm_world.rank, comm_world.size).batches()
    before, t0 = mine.compute_s, time.perf_counter()
    for _ in range(2):
        strategy.step(next(batches))
        assert strategy.phase == "compute"  # between steps: nothing to wait for
    wall = time.perf_counter() - t0
    strategy.finish()
    assert seen == ["overlapped", "overlapped"], seen
    assert sum(inner) <= mine.compute_s - before <= wall, (inner, mine.compute_s, wall)


def test_a_step_returns_its_own_loss_and_an_idle_rank_zero(comm_world) -> None:
    """The loss a step returns (the record's loss, the quality target's input) is the graph
    call's on a rank with a batch, and 0.0 on a rank without one, which still joins the
    all-reduce with a zero-scaled batch (issue 50: both mutants of that line timed out)."""
    cfg = config("tf", "mwms")
    mine = adapter(cfg)
    strategy = MWMSTF(cfg.strategy.mwms, comm_world)
    strategy.setup(mine)
    train, losses = strategy._train, []

    def observed(*args):  # type: ignore[no-untyped-def]
        out = train(*args)
        losses.append(float(out))
        return out

    strategy._train = observed
    batch = next(plan(cfg, comm_world.rank, comm_world.size).batches())
    got = strategy.step(batch if comm_world.rank == 0 else None)  # rank 0 alone has a batch
    strategy.finish()
    assert len(losses) == 1, losses  # every rank ran the one graph call
    if comm_world.rank == 0:
        assert got == losses[0] > 0, (got, losses)
    else:
        assert got == 0.0, got
