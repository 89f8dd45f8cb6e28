"""Horovod's TensorFlow integration: the strategy (``HorovodTF``: the token count's allreduce and
``hvd.DistributedGradientTape``, or one allreduce of the flat gradients, inside the one traced
train step) and the harness world's collectives (``HOROVOD``).

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
from hvdscale.core.world import SUM_NAME
from hvdscale.corpora.corpus import Batch
from hvdscale.frameworks.tf.adapter import TFAdapter
from hvdscale.frameworks.tf.step import Reduction
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
    """Horovod for the TensorFlow adapter: one training step is ONE graph call.

    The global token count's allreduce, forward, backward with the gradients' allreduce and
    the optimizer's update are traced into one function (``step.Reduction`` through the
    adapter's ``set_reduction``); nothing collective runs eagerly. The count's allreduce is
    issued first and is needed only when the backward pass starts, so it overlaps the forward
    pass. ``hooks``: ``hvd.DistributedGradientTape`` issues each gradient's allreduce as soon
    as the backward pass produces it (``num_groups`` groups them). ``after-backward``: the plain
    tape, then one allreduce of all gradients as one flat tensor (``num_groups`` slices: one
    grouped request). A rank without a batch runs the same step on a stand-in batch with weight
    0: every gradient is an exact zero and every allreduce the other ranks issue is matched
    under the same names, so nothing waits and nothing changes.
    """

    adapter: TFAdapter

    def __init__(self, cfg: HorovodConfig) -> None:
        if cfg.embedding_grads == "gathered" and cfg.overlap == "after-backward":
            # The flat allreduce densifies every gradient: the record would claim rows that
            # never travelled.
            from hvdscale.errors import ConfigError

            raise ConfigError("strategy.horovod.embedding_grads=gathered with TensorFlow needs "
                              "strategy.horovod.overlap=hooks (after-backward allreduces the "
                              "embedding gradients densely)")
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
        hooks = self.cfg.overlap == "hooks"
        adapter.set_reduction(Reduction(
            tokens=self._global_tokens, wrap_tape=self._wrap_tape if hooks else None,
            reduce_grads=None if hooks else self._reduce_after_backward))

    # --- traced into the adapter's step --------------------------------------------------------

    def _global_tokens(self, own: tf.Tensor) -> tf.Tensor:
        """The loss tokens of all ranks (float64: exact for any count a run reaches)."""
        total = self.hvd.allreduce(tf.reshape(own, [1]), op=self.hvd.Sum,  # hvd:
                                   name="hvdscale.tokens")
        return tf.reshape(total, [])

    def _wrap_tape(self, tape: tf.GradientTape) -> tf.GradientTape:
        """``hooks``: each gradient allreduced as the backward pass makes it."""
        return self.hvd.DistributedGradientTape(  # hvd:
            tape, op=self.op, compression=self.compression,
            sparse_as_dense=self.cfg.embedding_grads == "dense",
            num_groups=self.cfg.num_groups)

    def _reduce_after_backward(self, grads: list[tf.Tensor]) -> list[tf.Tensor]:
        """``after-backward``: all gradients as one flat tensor in one (grouped) request."""
        hvd, total = self.hvd, self.adapter.num_params
        flat = tf.concat([tf.reshape(g, [-1]) for g in grads], 0)
        n = max(1, min(self.cfg.num_groups, total))
        if n == 1:
            flat = hvd.allreduce(flat, op=self.op, compression=self.compression,  # hvd:
                                 name="hvdscale.grads")
        else:
            sizes = [total // n + (1 if i < total % n else 0) for i in range(n)]
            flat = tf.concat(hvd.grouped_allreduce(  # hvd:
                tf.split(flat, sizes), op=self.op, compression=self.compression,
                name="hvdscale.grads"), 0)
        parts = tf.split(flat, [int(np.prod(g.shape)) for g in grads])
        return [tf.reshape(p, g.shape) for p, g in zip(parts, grads, strict=True)]

    # --- the step ------------------------------------------------------------------------------

    def step(self, batch: Batch | None) -> float:
        t_start = time.time()
        # op=average divides the summed gradients by size again: scale by size/total instead.
        weight = float(self.size) if self.cfg.op == "average" else 1.0
        # The watchdog sees this rank as waiting: its first op is the token count's allreduce,
        # so a rank that never reaches its step leaves the others waiting in here, and that
        # rank (outside the call, computing) is the one that names itself.
        with self.communicating():
            loss = self.adapter.reduced_step(batch, weight)  # hvd: one graph call, every collective
        if batch is not None:
            # Forward, backward and the allreduces are one graph call: the backward marks are
            # the call's bounds.
            t_end = time.time()
            self.timeline.mark(start=t_start, backward_start=t_start, backward_end=t_end,
                               end=t_end)
        return loss

    def integration_info(self) -> dict[str, Any]:
        hooks = self.cfg.overlap == "hooks"
        return {
            "embedding_grads": self.cfg.embedding_grads, "overlap": self.cfg.overlap,
            "num_groups": self.cfg.num_groups,
            "integration": ("DistributedGradientTape in a tf.function" if hooks
                            else "one allreduce of the flat gradients in the train step's "
                            "tf.function"),
            "one_graph_call_per_step": True,
            "compute_includes_allreduce": True}
