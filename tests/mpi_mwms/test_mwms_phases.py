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
