"""A toy strategy that exists only in the tests: a plugin named in
``HVDSCALE_STRATEGY_PLUGINS=tests.toy_strategy`` (tests/integration/test_toy_strategy.py).

Each step every rank sums its gradient and token count, allreduces both over the harness's
world, and applies the token-weighted mean with an optimizer over its own full copy of the
parameters: exact synchronous data parallelism in a dozen lines, and nothing of hvdscale edited
for it. Its traits differ from every built-in's where a test can see them: fp32 only, and a
launch of its own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hvdscale.corpora.corpus import Batch
from hvdscale.registry import Hooks, StrategySpec, register
from hvdscale.strategies.base import Adapter, Strategy

ALONE = "the toy strategy wants a launch of its own"
REFUSES = "the toy strategy averages fp32 gradients only"


class Toy(Strategy):
    """Allreduce of the flat gradients and the token count; the same update on every rank."""

    name = "toy"

    def __init__(self, world: Any) -> None:
        self.world = world

    def setup(self, adapter: Adapter) -> None:
        super().setup(adapter)
        start = self.world.bcast(adapter.params_buffer().copy(), root=0)  # rank 0's start
        self.params = start.astype(np.float32)
        self.opt = adapter.shard_optimizer(self.params)
        self._publish()

    def _publish(self) -> None:
        """Make ``self.params`` the model's parameters."""
        self.adapter.params_buffer()[:] = self.params
        self.adapter.params_changed()

    def step(self, batch: Batch | None) -> float:
        a = self.adapter
        a.zero_grad()
        loss = a.forward_backward(batch, 1.0) if batch is not None else 0.0
        tokens = float(batch.loss_tokens) if batch is not None else 0.0
        with self.communicating():
            summed = self.world.allreduce_sum(np.append(a.grads_buffer(), tokens))
        if summed[-1] > 0:  # no tokens on any rank: no update, as one process would do
            self.opt.grad[:] = summed[:-1] / summed[-1]
            self.opt.step()
            self._publish()
        return loss


def _build(cfg: Any, world: Any, hooks: Hooks) -> Toy:
    return Toy(world)


SPEC = register(StrategySpec(
    "toy", "a test's allreduce over the harness's world", _build, order=4,
    families=("shared-link", "ring-bandwidth"), precisions=("fp32",), refuses=REFUSES,
    alone=ALONE, torchrun=""))  # the harness's world alone: it runs under torchrun too
