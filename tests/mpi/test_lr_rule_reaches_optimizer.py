"""The learning-rate rules reach the optimizer itself (issue 39: with the optimizer built from
the unscaled settings every record still said the rule was applied): a whole ``hvdscale run`` at
np=2 under weak scaling, the torch optimizer's param groups read as the run built them."""

from __future__ import annotations

import math
import tempfile
from typing import Any

import pytest

from hvdscale.config import load_config
from hvdscale.frameworks.torch import adapter as torch_adapter
from hvdscale.train.runner import run
from tests.noise_probe import TINY_LM


def _optimizer_of_run(world: Any, monkeypatch: pytest.MonkeyPatch, *sets: str) -> Any:
    """The optimizer the run's adapter got (as made, before Horovod wraps it) and the record."""
    made: list[Any] = []
    real = torch_adapter.make_optimizer

    def keep(params: Any, cfg: Any) -> Any:
        made.append(real(params, cfg))
        return made[-1]

    monkeypatch.setattr(torch_adapter, "make_optimizer", keep)
    out = world.bcast(tempfile.mkdtemp(prefix="hvdscale-lr-") if world.rank == 0 else None)
    rec = run(load_config(None, [*TINY_LM, "framework=torch", "strategy.name=horovod",
                                 "data.scaling=weak", "measure.eval_every=0", "measure.steps=2",
                                 "measure.warmup_steps=0", *sets]), out)
    assert len(made) == 1, made
    return made[0], rec


def test_sqrt_adam_sets_the_optimizers_rate_betas_and_eps(hvd, comm_world, monkeypatch) -> None:
    k = comm_world.size
    opt, rec = _optimizer_of_run(comm_world, monkeypatch, "optim.name=adam", "optim.lr=0.01",
                                 "optim.scale_lr=sqrt_adam", "optim.betas=[0.9,0.99]",
                                 "optim.eps=0.000001")
    group = opt.param_groups[0]
    assert group["lr"] == pytest.approx(0.01 * math.sqrt(k), rel=1e-12), group["lr"]
    assert group["betas"] == pytest.approx((1 - k * 0.1, 1 - k * 0.01), rel=1e-12)
    assert group["eps"] == pytest.approx(1e-6 / math.sqrt(k), rel=1e-12)
    if comm_world.rank == 0:
        assert rec.status == "ok"


def test_legw_warms_the_optimizer_up_to_the_scaled_rate(hvd, comm_world, monkeypatch) -> None:
    k = comm_world.size
    opt, _ = _optimizer_of_run(comm_world, monkeypatch, "optim.name=sgd", "optim.lr=0.2",
                               "optim.scale_lr=legw", "optim.warmup_steps=3")
    group = opt.param_groups[0]
    assert group["warmup_peak"] == pytest.approx(0.2 * math.sqrt(k), rel=1e-12), group
    assert group["warmup_steps"] == 3 * k and group["warmup_base"] == pytest.approx(0.2)
