"""``optim.warmup_steps``: the ramp's rates, and every optimizer applying them from its own
update count (PyTorch's, the TF adapter's inside one traced function, the numpy shards')."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hvdscale.config import OptimConfig, load_config, to_dict
from hvdscale.core.lr_warmup import lr_at, rate_at, warmup_of, warmup_rates
from hvdscale.errors import ConfigError
from hvdscale.records.experiment import identity
from hvdscale.train.lr import scaled_optim

STEPS = 6  # updates run: 3 of warm-up, then 3 at the peak
N = 40  # parameters


def _grads() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [rng.standard_normal(N).astype(np.float32) for _ in range(STEPS)]


def _init() -> np.ndarray:
    return np.random.default_rng(3).standard_normal(N).astype(np.float32)


def _warm(name: str) -> OptimConfig:
    """The section the optimizers get for lr 0.1, 4 workers, linear rule, 3 warm-up steps."""
    cfg = OptimConfig(name=name, lr=0.1, scale_lr="linear", warmup_steps=3)
    return scaled_optim(cfg, "weak", 4)[0]


def _plain(cfg: OptimConfig) -> OptimConfig:
    return dataclasses.replace(cfg, warmup_steps=0, warmup_start_lr=None)


def test_lr_at_ramps_linearly_then_holds() -> None:
    assert [lr_at(t, 0.1, 0.4, 3) for t in range(6)] == pytest.approx(
        [0.1, 0.2, 0.3, 0.4, 0.4, 0.4], abs=1e-15)
    assert lr_at(0, 0.1, 0.4, 3) == 0.1 and lr_at(3, 0.1, 0.4, 3) == 0.4
    assert lr_at(0, 0.1, 0.4, 0) == 0.4  # no warm-up: the peak from the first update
    assert lr_at(1, 0.0, 1.0, 4) == 0.25  # from zero
    cfg = _warm("sgd")
    assert cfg.lr == pytest.approx(0.4) and cfg.warmup_start_lr == 0.1
    assert warmup_rates(cfg) == [rate_at(cfg, t) for t in range(4)]
    assert warmup_rates(cfg)[-1] == cfg.lr


def test_no_ramp_without_steps_or_scaling() -> None:
    for cfg, scaling in ((OptimConfig(lr=0.1, scale_lr="linear"), "weak"),
                         (OptimConfig(lr=0.1, warmup_steps=5), "weak"),
                         (OptimConfig(lr=0.1, scale_lr="linear", warmup_steps=5), "strong")):
        used = scaled_optim(cfg, scaling, 4)[0]
        assert all(rate_at(used, t) == used.lr for t in range(8))  # the same float, bit for bit


def test_config_checks_and_record() -> None:
    with pytest.raises(ConfigError, match=r"optim\.warmup_steps must be >= 0"):
        OptimConfig(warmup_steps=-1)
    with pytest.raises(ConfigError, match=r"optim\.warmup_start_lr must be >= 0"):
        OptimConfig(warmup_start_lr=-0.5)
    cfg = load_config(None, ["optim.warmup_steps=7", "optim.scale_lr=sqrt"]).optim
    assert cfg.warmup_steps == 7
    info = scaled_optim(cfg, "weak", 4)[1]
    assert info["warmup_steps"] == 7 and info["warmup_start_lr"] == cfg.lr


def test_identity_keeps_old_records_and_splits_on_a_real_ramp() -> None:
    old = to_dict(load_config(None, ["optim.scale_lr=linear"]))
    for key in ("warmup_steps", "warmup_start_lr"):
        old["optim"].pop(key)  # a record from before the setting
    same = to_dict(load_config(None, ["optim.scale_lr=linear"]))
    idle = to_dict(load_config(None, ["optim.warmup_steps=5"]))  # nothing to ramp from
    ramp = to_dict(load_config(None, ["optim.scale_lr=linear", "optim.warmup_steps=5"]))
    assert identity(old) == identity(same)
    assert identity(idle)["optim"] == identity(to_dict(load_config(None, [])))["optim"]
    assert identity(ramp)["optim"]["warmup_steps"] == 5


# --- every optimizer applies the ramp --------------------------------------------------------

def _torch_run(cfg: OptimConfig, rates: list[float] | None = None) -> np.ndarray:
    """``make_optimizer``'s steps; with ``rates``, a plain optimizer whose rate is set by hand
    before each step (the reference)."""
    import torch

    from hvdscale.frameworks.torch.optimizer import make_optimizer
    p = torch.nn.Parameter(torch.from_numpy(_init().copy()))
    opt = make_optimizer([p], _plain(cfg) if rates else cfg)
    for i, g in enumerate(_grads()):
        p.grad = torch.from_numpy(g.copy())
        if rates:
            for group in opt.param_groups:
                group["lr"] = rates[i]
        opt.step()
    return p.detach().numpy().copy()


def _numpy_run(cfg: OptimConfig, rates: list[float] | None = None) -> np.ndarray:
    from hvdscale.frameworks.shard_optim import NumpyShardOptimizer
    shard = _init().copy()
    opt = NumpyShardOptimizer(shard, _plain(cfg) if rates else cfg)
    for i, g in enumerate(_grads()):
        if rates:
            opt.cfg = dataclasses.replace(opt.cfg, lr=rates[i])
        opt.grad[:] = g
        opt.step()
    return shard


def _tf_run(cfg: OptimConfig, rates: list[float] | None = None) -> np.ndarray:
    """The warm optimizer inside ONE traced function (a rate baked in as a constant would
    show); the reference runs eagerly, its rate set by hand before each update."""
    from hvdscale.frameworks.tf.optimizer import TFOptimizer
    from hvdscale.frameworks.tf.quiet import tf
    v = tf.Variable(_init())
    g = tf.Variable(tf.zeros([N]))
    opt = TFOptimizer(_plain(cfg) if rates else cfg, [v])
    step = tf.function(lambda: opt.apply([g.read_value()], [v]))
    for i, grad in enumerate(_grads()):
        g.assign(grad)
        if rates:
            opt.cfg = dataclasses.replace(opt.cfg, lr=rates[i])
            opt.apply([g.read_value()], [v])
        else:
            step()
    return v.numpy()


RUNS = {"torch": _torch_run, "numpy": _numpy_run, "tf": _tf_run}


@pytest.mark.parametrize("name", ["sgd", "momentum", "adam"])
@pytest.mark.parametrize("path", sorted(RUNS))
def test_optimizer_applies_the_ramp(path: str, name: str) -> None:
    cfg = _warm(name)
    rates = [rate_at(cfg, t) for t in range(STEPS)]
    assert rates[0] == 0.1 and rates[3:] == [cfg.lr] * 3
    run = RUNS[path]
    got, want, flat = run(cfg), run(cfg, rates), run(_plain(cfg))
    # The ramp's effect on the parameters is orders larger than the tolerance.
    assert np.abs(flat - want).max() > 1e-3
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["sgd", "adam"])
def test_every_path_same_parameters(name: str) -> None:
    """The same rate at the same update on every path. TF's Adam rounds its bias correction in
    float32 in-graph, 2e-5 apart from torch's even without a warm-up: hence its tolerance."""
    cfg = _warm(name)
    torch_p = _torch_run(cfg)
    atol = 1e-6 if name == "sgd" else 5e-5
    assert np.abs(torch_p - _torch_run(_plain(cfg))).max() > 100 * atol  # the ramp's effect
    np.testing.assert_allclose(_numpy_run(cfg), torch_p, rtol=0, atol=1e-6)
    np.testing.assert_allclose(_tf_run(cfg), torch_p, rtol=0, atol=atol)


@pytest.mark.parametrize("path", sorted(RUNS))
def test_no_warmup_is_the_plain_optimizer(path: str) -> None:
    """warmup_steps 0, or nothing to ramp (no scaling): bit for bit the plain optimizer."""
    base = OptimConfig(name="adam", lr=0.1)
    idle = scaled_optim(dataclasses.replace(base, warmup_steps=3), "weak", 4)[0]
    np.testing.assert_array_equal(RUNS[path](idle), RUNS[path](base))


def test_torch_plain_class_without_warmup() -> None:
    import torch

    from hvdscale.frameworks.torch.optimizer import make_optimizer
    p = torch.nn.Parameter(torch.zeros(3))
    assert type(make_optimizer([p], OptimConfig(warmup_steps=4))) is torch.optim.SGD
    assert isinstance(make_optimizer([p], _warm("sgd")), torch.optim.SGD)


def test_the_ramps_ends_exactly() -> None:
    """Issue 39 (mutation survivors): from update ``warmup_steps`` on the rate is the peak bit
    for bit (the ramp's formula there gives 0.9000000000000001), a one-step warm-up starts at
    the start rate, and a config without steps has no ramp at all, whatever its start rate."""
    assert lr_at(3, 0.1, 0.9, 3) == 0.9
    assert [lr_at(t, 0.1, 0.9, 1) for t in range(3)] == [0.1, 0.9, 0.9]
    one = OptimConfig(lr=0.4, warmup_steps=1, warmup_start_lr=0.1)
    assert [rate_at(one, t) for t in range(3)] == [0.1, 0.4, 0.4]
    assert warmup_of(OptimConfig(lr=0.4, warmup_steps=0, warmup_start_lr=0.1)) is None
