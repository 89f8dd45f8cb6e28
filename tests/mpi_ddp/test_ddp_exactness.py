"""DDP's token-weighted exactness, with the shared harness (tests/exactness.py): K steps on N
ranks change the parameters as one process on the union of the uneven batches does, and the
naive per-rank mean misses by a wide margin. Also the settings that change how DDP
communicates (buckets, bucket views, static graph), idle ranks in epoch mode (zero step and
join), and the compression hooks, judged like Horovod's fp16 compression."""

from __future__ import annotations

import numpy as np
import pytest

from hvdscale.errors import ConfigError
from hvdscale.frameworks.torch.ddp import DDPStrategy
from tests.exactness import (
    CUSTOM,
    FP16_MIN_ERR,
    adapter,
    check_exact,
    config,
    distributed,
    identical_replicas,
    one_token_or_none,
    reference,
    rel_change,
    worker_steps,
)

REL_TOL = 1e-5
"""As Horovod's (tests/mpi/test_exactness.py): float32 sums in another order, three steps of
momentum; DDP's size x (1/size) adds one rounding per element."""
FP16_REL_TOL = 2e-3
"""Horovod's fp16 tolerance (tests/mpi/test_exactness.py): 4 x 2^-11."""
EPOCH = ("data.bucketing.enabled=true", "data.bucketing.boundaries=[4,7,10]",
         "data.synthetic.max_len=14", "data.synthetic.sentences_per_rank=40", "measure.epochs=1",
         "measure.warmup_steps=0")
"""One epoch of length-bucketed batches: ranks hold different numbers of batches."""


def _run(comm_world, *extra: str) -> tuple[object, np.ndarray, object]:
    cfg = config("torch", "ddp", *extra)
    params, strategy = distributed(cfg, comm_world)
    identical_replicas(comm_world, params)
    return cfg, params, strategy


@pytest.mark.np3
@pytest.mark.parametrize("model", [(), CUSTOM["torch"]], ids=["shipped", "custom"])
def test_ddp_equals_one_process_on_union(model, comm_world) -> None:
    cfg, params, _ = _run(comm_world, *model)
    check_exact(cfg, params, comm_world.size, REL_TOL)


def test_ddp_with_adam_is_exact(comm_world) -> None:
    # Adam divides by the gradient's scale: a wrong weighting shows in its direction. Not at
    # np=3 (as Horovod's Adam case): Adam's normalisation turns the last-bit differences of
    # near-zero gradients (3 x 1/3 in DDP's average, or another summation order) into ~1e-4.
    cfg, params, _ = _run(comm_world, "optim.name=adam", "optim.lr=0.01")
    check_exact(cfg, params, comm_world.size, REL_TOL)


@pytest.mark.np3
@pytest.mark.parametrize("extra", [
    ("strategy.ddp.bucket_cap_mb=0.01",),
    ("strategy.ddp.gradient_as_bucket_view=true",),
    ("strategy.ddp.static_graph=true", "strategy.ddp.find_unused_parameters=false"),
], ids=["small-buckets", "bucket-view", "static-graph"])
def test_ddp_settings_keep_the_update_exact(extra, comm_world) -> None:
    cfg, params, strategy = _run(comm_world, *extra)
    check_exact(cfg, params, comm_world.size, REL_TOL)
    if "strategy.ddp.bucket_cap_mb=0.01" in extra:
        assert len(str(strategy.info()["bucket_sizes"]).split(",")) > 1


@pytest.mark.np3
@pytest.mark.parametrize("idle", ["zero", "join"])
def test_ddp_idle_ranks_in_epoch_mode_are_exact(idle, comm_world) -> None:
    cfg = config("torch", "ddp", *EPOCH, f"strategy.ddp.idle={idle}")
    steps = worker_steps(cfg, comm_world.size)
    assert any(None in s for s in steps), "some rank should run out of batches"
    params, strategy = distributed(cfg, comm_world)
    identical_replicas(comm_world, params)
    check_exact(cfg, params, comm_world.size, REL_TOL, steps=steps)
    assert strategy.info()["join"]["used"] == (idle == "join")


@pytest.mark.parametrize("others", ["one token in all", "no batch anywhere"])
def test_ddp_zero_step_of_an_idle_rank(others, comm_world) -> None:
    # idle=zero: a rank without a batch joins DDP's bucket allreduces with a zero gradient
    # whenever any rank has a batch, down to one loss token in all (a rank skipping there
    # leaves the others waiting); with no batch anywhere no rank updates, since momentum
    # alone would still move the parameters.
    cfg = config("torch", "ddp", "strategy.ddp.idle=zero")
    mine = adapter(cfg)
    strategy = DDPStrategy(cfg.strategy.ddp, comm_world)
    strategy.setup(mine)
    # two steps first: momentum is non-zero by then
    one_token_or_none(cfg, comm_world, strategy, mine, others, REL_TOL, steps_before=2)


def _judge_compressed(cfg, params: np.ndarray, world, tol: float) -> float:
    """Horovod's fp16 judgement: close to the fp32 update, not equal, same direction."""
    init = adapter(cfg).params_buffer().astype(np.float64)
    ref = reference(cfg, worker_steps(cfg, world.size))
    rel = rel_change(params, ref, init)
    got, want = params - init, ref - init
    cos = float(got @ want / (np.linalg.norm(got) * np.linalg.norm(want)))
    print(f"{cfg.strategy.ddp.comm_hook}: relative error {rel:.2e}, cosine {cos:.6f}")
    # Above float32's summation-order error by a wide margin: the hook really compressed.
    assert FP16_MIN_ERR < rel < tol, rel
    assert cos > 1 - tol**2, cos
    return rel


@pytest.mark.np3
def test_ddp_fp16_hook_is_judged_like_horovods_fp16(comm_world) -> None:
    cfg, params, strategy = _run(comm_world, "strategy.ddp.comm_hook=fp16")
    _judge_compressed(cfg, params, comm_world, FP16_REL_TOL)
    assert strategy.ddp_logging().get("comm_hook") == "fp16_compress_hook"  # as DDP made it


@pytest.mark.np3
def test_ddp_bf16_hook_is_refused_on_cpu_on_every_rank(comm_world) -> None:
    # torch's bf16 hook needs NCCL: on gloo every rank refuses before any collective.
    with pytest.raises(ConfigError, match="comm_hook=bf16 needs a GPU run"):
        _run(comm_world, "strategy.ddp.comm_hook=bf16")


@pytest.mark.np3
def test_ddp_powersgd_is_exact_before_it_starts_and_compresses_after(comm_world) -> None:
    # Before start_iter PowerSGD's hook is a plain allreduce: exact.
    cfg, params, _ = _run(comm_world, "strategy.ddp.comm_hook=powersgd",
                          "strategy.ddp.powersgd_start_iter=10")
    check_exact(cfg, params, comm_world.size, REL_TOL)
    # From step 2 on, a rank-1 approximation: not the exact update, but the same replicas
    # and a change that points the same way.
    cfg, params, _ = _run(comm_world, "strategy.ddp.comm_hook=powersgd",
                          "strategy.ddp.powersgd_start_iter=2")
    init = adapter(cfg).params_buffer().astype(np.float64)
    ref = reference(cfg, worker_steps(cfg, comm_world.size))
    assert rel_change(params, ref, init) > REL_TOL
    got, want = params - init, ref - init
    assert float(got @ want / (np.linalg.norm(got) * np.linalg.norm(want))) > 0.5
