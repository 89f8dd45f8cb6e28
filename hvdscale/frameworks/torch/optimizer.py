"""The run's torch optimizer: over the model's parameters (``TorchAdapter.optimizer``) or over a
flat numpy shard (the parameter server's ``ShardOptimizer``), with the same math."""

from __future__ import annotations

import numpy as np
import torch

from hvdscale.config import OptimConfig
from hvdscale.frameworks.torch.warmup import warmup_optimizer


def make_optimizer(params: list[torch.nn.Parameter], cfg: OptimConfig) -> torch.optim.Optimizer:
    """The run's optimizer over ``params`` (with ``optim.warmup_steps``' ramp: ``warmup``)."""
    return warmup_optimizer(_plain_optimizer(params, cfg), cfg)


def _plain_optimizer(params: list[torch.nn.Parameter], cfg: OptimConfig) -> torch.optim.Optimizer:
    if cfg.name == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr)
    if cfg.name == "momentum":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum)
    return torch.optim.Adam(params, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps)


class ShardOptimizer:
    """The run's torch optimizer over a numpy shard: same math as ``TorchAdapter.optimizer``."""

    def __init__(self, shard: np.ndarray, cfg: OptimConfig) -> None:
        self.param = torch.nn.Parameter(torch.from_numpy(shard), requires_grad=True)
        self.grad = np.zeros_like(shard)
        self.param.grad = torch.from_numpy(self.grad)
        self.optimizer = make_optimizer([self.param], cfg)
        self.keeps_zero_grad_rows = cfg.name == "sgd"

    def step(self) -> None:
        """Apply the gradient currently in ``self.grad`` to the shard."""
        self.optimizer.step()
