"""TensorFlow: K steps on N ranks equal one TF process on the union of the ranks' batches.

Batches are deliberately uneven (strong scaling with an odd global batch, long-tailed lengths),
so per-rank token counts differ. Exactness is judged on the parameter change (parameters minus
the initial ones), which the N(0,1) initialisation would otherwise drown, and a negative control
(naive averaging of per-rank mean losses) must miss the tolerance by far, so the tolerance is
known to be tight enough to see a wrong weighting. The harness is shared with PyTorch's cases
(tests/exactness.py); these are TensorFlow's.
"""

from __future__ import annotations

import numpy as np
import pytest

from hvdscale.core.world import is_gloo_launch
from tests.exactness import (
    CUSTOM,
    check_exact,
    distributed,
    identical_replicas,
    ps_case,
    ps_cases,
    worker_steps,
)
from tests.exactness import config as _config

REL_TOL = 1e-4
"""On parameter changes: float32 rounding of the summed gradients gives ~1e-6 here; the naive
per-rank mean (the negative control) is off by more than 1e-2."""


def _cfg(strategy: str, *extra: str):
    return _config("tf", strategy, *extra)


@pytest.mark.parametrize("extra", [
    ("strategy.horovod.op=sum",),
    ("strategy.horovod.op=average", "optim.name=adam", "optim.lr=0.01"),
    ("strategy.horovod.embedding_grads=gathered",),
    ("strategy.horovod.overlap=after-backward",),
    pytest.param(CUSTOM["tf"], marks=pytest.mark.np3, id="custom"),
])
def test_tf_horovod_equals_one_process_on_union(extra, hvd, comm_world) -> None:
    cfg = _cfg("horovod", *extra)
    params, _ = distributed(cfg, comm_world)
    identical_replicas(comm_world, params)
    check_exact(cfg, params, comm_world.size, REL_TOL)


@pytest.mark.np3
@pytest.mark.parametrize("strategy", ["horovod", "ps"])
def test_tf_whole_epoch_with_idle_steps_is_exact(strategy, hvd, comm_world) -> None:
    if strategy == "ps" and is_gloo_launch():
        pytest.skip("the parameter server needs an MPI launch")
    cfg = _cfg(strategy, "data.bucketing.enabled=true", "data.bucketing.boundaries=[4,7,10]",
               "data.synthetic.max_len=14", "data.synthetic.sentences_per_rank=40",
               "measure.epochs=1", "measure.warmup_steps=0")
    params, strategy_obj = distributed(cfg, comm_world)
    steps = worker_steps(cfg, strategy_obj.num_workers if strategy == "ps" else comm_world.size)
    assert any(None in s for s in steps), "some rank should run out of batches (idle steps)"
    identical_replicas(comm_world, params)
    check_exact(cfg, params, comm_world.size, REL_TOL)


@ps_cases
def test_tf_ps_equals_one_process(placement, servers, model, hvd, comm_world) -> None:
    cfg, params, strategy = ps_case("tf", placement, servers, comm_world, model)
    check_exact(cfg, params, strategy.num_workers, REL_TOL)


def test_tf_independent_replicas_diverge(comm_world) -> None:
    params, _ = distributed(_cfg("independent"), comm_world)
    everyone = comm_world.allgather(params)
    assert not np.array_equal(everyone[0], everyone[1])
