"""Horovod's TensorFlow integration: the strategy (``HorovodTF``, ``hvd.DistributedGradientTape``
in the traced train step, or one allreduce of the flat gradients) and the harness world's
collectives (``HOROVOD``).

Horovod itself is imported only when a Horovod strategy or world is made, so TensorFlow runs of
other strategies never need it. The framework-independent parts (settings, timeline, record
facts, the token-weighted scaling) are ``hvdscale.strategies.horovod``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from hvdscale.config import HorovodConfig
from hvdscale.core.data import Batch, collate
from hvdscale.core.world import SUM_NAME
from hvdscale.frameworks.tf.adapter import TFAdapter
from hvdscale.strategies.horovod import HorovodBase


class TFCollectives:
    """TensorFlow's Horovod as the harness's world uses it (``core.world.HorovodCollectives``)."""

    module = "horovod.tensorflow"

    def barrier(self) -> None:
        # horovod.tensorflow has no barrier: a one-element allreduce is one
        self.allreduce_sum(np.zeros(1), SUM_NAME)

    def allreduce_sum(self, values: np.ndarray, name: str) -> np.ndarray:
        import horovod.tensorflow as hvd  # hvd:

        return hvd.allreduce(tf.constant(values), op=hvd.Sum, name=name).numpy()  # hvd:

    def allreduce_op(self, nbytes: int, name: str) -> Callable[[], object]:
        import horovod.tensorflow as hvd  # hvd:

        buf = tf.ones([nbytes // 4], dtype=tf.float32)
        return lambda: hvd.allreduce(buf, op=hvd.Sum, name=name)  # hvd:


HOROVOD = TFCollectives()
"""This package's ``HOROVOD`` hook (``hvdscale.frameworks.base.Framework``)."""


class HorovodTF(HorovodBase):
    """Horovod for the TensorFlow adapter: ``hvd.DistributedGradientTape`` in the train step.

    ``hooks`` (the tape): the tape wrapper is traced into the adapter's train step, so each
    gradient's allreduce is issued as soon as the backward pass produces it, inside the same
    graph call (``num_groups`` groups them). ``after-backward``: the plain tape, then one
    allreduce of all gradients as one flat tensor (``num_groups`` slices: one grouped
    request). The global token count is allreduced first (eagerly; TensorFlow's graph call
    cannot take a value that arrives during its forward pass). A rank without a batch runs the
    same traced step on a one-sentence, two-token batch with loss scale 0: every gradient is an
    exact zero and every allreduce the other ranks issue is matched under the same names, so
    nothing waits and nothing changes.
    """

    adapter: TFAdapter

    def __init__(self, cfg: HorovodConfig) -> None:
        import horovod.tensorflow as hvd  # hvd:

        super().__init__(hvd, cfg)
        self.size = hvd.size()

    def setup(self, adapter: TFAdapter) -> None:  # type: ignore[override]
        hvd = self.hvd
        super().setup(adapter)
        # Optimizer state is broadcast with the parameters: fresh state is zeros everywhere,
        # but a restored or warm-started optimizer must start identical on every rank too.
        hvd.broadcast_variables(adapter.variables + adapter.optimizer_variables,  # hvd:
                                root_rank=0)
        dense = self.cfg.embedding_grads == "dense"
        if self.cfg.overlap == "hooks":
            adapter.set_tape_wrapper(lambda tape: hvd.DistributedGradientTape(  # hvd:
                tape, op=self.op, compression=self.compression, sparse_as_dense=dense,
                num_groups=self.cfg.num_groups))
        sent = np.array([4, 4], dtype=np.int64)  # the first non-special token id, twice
        self._zero_batch = collate([sent], None if adapter.kind == "lm" else [sent],
                                   adapter.kind)

    def _reduce_flat(self, flat: Any) -> Any:
        """``after-backward``: the flat gradient tensor in one (grouped) request (traced)."""
        hvd, n = self.hvd, max(1, min(self.cfg.num_groups, self.adapter.num_params))
        if n == 1:
            return hvd.allreduce(flat, op=self.op, compression=self.compression,  # hvd:
                                 name="hvdscale.grads")
        total = self.adapter.num_params
        sizes = [total // n + (1 if i < total % n else 0) for i in range(n)]
        parts = hvd.grouped_allreduce(tf.split(flat, sizes), op=self.op,  # hvd:
                                      compression=self.compression, name="hvdscale.grads")
        return tf.concat(parts, 0)

    def _global_tokens(self, own: float) -> float:
        with self.communicating():
            total = self.hvd.allreduce(tf.constant([own], tf.float64), op=self.hvd.Sum,  # hvd:
                                       name="hvdscale.tokens")
            return float(total.numpy()[0])

    def step(self, batch: Batch | None) -> float:
        t_start = time.time()
        total = self._global_tokens(float(batch.loss_tokens) if batch is not None else 0.0)
        if total == 0:  # no rank has a batch: no update, as one process would do
            return 0.0
        numerator = float(self.size) if self.cfg.op == "average" else 1.0
        loss = 0.0
        self.adapter.zero_grad()
        t_bwd = time.time()  # forward and backward are one graph call here
        if batch is None:
            self.adapter.forward_backward(self._zero_batch, 0.0)  # zeros, same allreduces
        else:
            loss = self.adapter.forward_backward(batch, numerator / total)
        t_bwd_end = time.time()
        if self.cfg.overlap == "after-backward":
            with self.communicating():
                self.adapter.reduce_grads(self._reduce_flat)
        self.adapter.step()
        if batch is not None:
            self.timeline.mark(start=t_start, backward_start=t_bwd, backward_end=t_bwd_end,
                               end=time.time())
        return loss

    def integration_info(self) -> dict[str, Any]:
        hooks = self.cfg.overlap == "hooks"
        return {
            "embedding_grads": self.cfg.embedding_grads, "overlap": self.cfg.overlap,
            "num_groups": self.cfg.num_groups,
            "integration": ("DistributedGradientTape in a tf.function" if hooks
                            else "one allreduce of the flat gradients after the train step"),
            "compute_includes_allreduce": hooks}
