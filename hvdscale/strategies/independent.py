"""Independent replicas: no communication at all, the ideal case of the seed notes."""

from __future__ import annotations

from hvdscale.corpora.corpus import Batch
from hvdscale.strategies.base import Strategy


class Independent(Strategy):
    """Each rank trains its own replica on its own batches (token-averaged locally)."""

    name = "independent"
    synchronous = False

    def step(self, batch: Batch | None) -> float:
        if batch is None:  # out of batches: nothing to do, and nobody waits for this rank
            return 0.0
        return self.adapter.train_step(batch, 1.0 / batch.loss_tokens)
