"""The run's optimizer over a flat numpy shard, with PyTorch's update rules (numpy only).

The parameter server of a TensorFlow run keeps its shard and optimizer state in numpy, so no
framework runtime is needed on the server path. The rules are torch.optim's (and the TF
adapter's own optimizer's), so every strategy of both frameworks trains the same function:

* sgd: ``p -= lr * g``
* momentum (heavy ball, no dampening): ``b = mu * b + g; p -= lr * b``
* adam: ``m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
  p -= lr / (1-b1^t) * m / (sqrt(v) / sqrt(1-b2^t) + eps)``
"""

from __future__ import annotations

import math

import numpy as np

from hvdscale.config import OptimConfig
from hvdscale.core.lr_warmup import rate_at


class NumpyShardOptimizer:
    """An optimizer of the run's kind over ``shard`` (float32, updated in place).

    The server writes the shard's gradient into ``grad`` and calls ``step``.
    """

    def __init__(self, shard: np.ndarray, cfg: OptimConfig) -> None:
        self.shard = shard
        self.cfg = cfg
        self.grad = np.zeros_like(shard)
        self.t = 0
        self.updates = 0
        """Updates applied: the warm-up's position (``optim.warmup_steps``)."""
        # Plain SGD leaves a zero-gradient element unchanged (p - lr * 0 == p); momentum and
        # Adam move it through their state.
        self.keeps_zero_grad_rows = cfg.name == "sgd"
        self.buf = np.zeros_like(shard) if cfg.name == "momentum" else None
        if cfg.name == "adam":
            self.m = np.zeros_like(shard)
            self.v = np.zeros_like(shard)
            self._tmp = np.empty_like(shard)

    def step(self) -> None:
        """Apply ``grad`` to the shard."""
        c, g, p = self.cfg, self.grad, self.shard
        rate = rate_at(c, self.updates)  # exactly c.lr without a warm-up
        self.updates += 1
        lr = np.float32(rate)
        if c.name == "sgd":
            p -= lr * g
            return
        if c.name == "momentum":
            assert self.buf is not None
            self.buf *= np.float32(c.momentum)
            self.buf += g
            p -= lr * self.buf
            return
        self.t += 1
        b1, b2 = c.betas
        self.m *= np.float32(b1)
        self.m += np.float32(1 - b1) * g
        self.v *= np.float32(b2)
        self.v += np.float32(1 - b2) * g * g
        step_size = np.float32(rate / (1 - b1**self.t))
        denom = self._tmp
        np.sqrt(self.v, out=denom)
        denom /= np.float32(math.sqrt(1 - b2**self.t))
        denom += np.float32(c.eps)
        p -= step_size * self.m / denom
