"""TensorFlow's MultiWorkerMirroredStrategy: K steps on N ranks equal one TF process on the
union of the ranks' batches, with uneven per-rank batches and idle ranks in epoch mode.

Judged on parameter changes with the naive per-rank mean as a negative control (the shared
harness, tests/exactness.py), as Horovod's TensorFlow cases in tests/mpi_tf.
"""

from __future__ import annotations

import pytest

from hvdscale.frameworks.tf.mwms import MWMSTF
from tests.exactness import (
    CUSTOM,
    adapter,
    check_exact,
    distributed,
    identical_replicas,
    one_token_or_none,
    worker_steps,
)
from tests.exactness import config as _config

REL_TOL = 1e-4
"""On parameter changes: float32 rounding of the summed gradients gives ~1e-6 here; the naive
per-rank mean (the negative control) is off by more than 1e-2."""


def _cfg(*extra: str):  # type: ignore[no-untyped-def]
    return _config("tf", "mwms", *extra)


@pytest.mark.np3
@pytest.mark.parametrize("extra", [
    (),
    ("optim.name=adam", "optim.lr=0.01"),
    ("model.kind=lm",),
    pytest.param(CUSTOM["tf"], id="custom"),
])
def test_mwms_equals_one_process_on_union(extra, comm_world) -> None:
    cfg = _cfg(*extra)
    params, _ = distributed(cfg, comm_world)
    identical_replicas(comm_world, params)
    check_exact(cfg, params, comm_world.size, REL_TOL)


@pytest.mark.np3
def test_mwms_whole_epoch_with_idle_steps_is_exact(comm_world) -> None:
    cfg = _cfg("data.bucketing.enabled=true", "data.bucketing.boundaries=[4,7,10]",
               "data.synthetic.max_len=14", "data.synthetic.sentences_per_rank=40",
               "measure.epochs=1", "measure.warmup_steps=0")
    params, _ = distributed(cfg, comm_world)
    steps = worker_steps(cfg, comm_world.size)
    assert any(None in s for s in steps), "some rank should run out of batches (idle steps)"
    identical_replicas(comm_world, params)
    check_exact(cfg, params, comm_world.size, REL_TOL)


@pytest.mark.parametrize("others", ["one token in all", "no batch anywhere"])
def test_mwms_step_with_one_token_or_none_in_all(others, comm_world) -> None:
    # The global count decides: one loss token anywhere is a step every rank takes (a rank
    # without a batch with a zero gradient); none anywhere is no update on any rank, since
    # momentum alone would still move the parameters.
    cfg = _cfg()
    mine = adapter(cfg)
    strategy = MWMSTF(cfg.strategy.mwms, comm_world)
    strategy.setup(mine)
    one_token_or_none(cfg, comm_world, strategy, mine, others, REL_TOL)
