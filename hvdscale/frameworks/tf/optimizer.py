"""The run's optimizer over TensorFlow variables, written with PyTorch's update rules
(``hvdscale.frameworks.shard_optim`` has the same rules in numpy), so both frameworks and every
strategy train the same function."""

from __future__ import annotations

from hvdscale.config import OptimConfig
from hvdscale.core.lr_warmup import warmup_of, warmup_rates
from hvdscale.frameworks.tf.quiet import tf


class TFOptimizer:
    """The run's optimizer over TF variables, with PyTorch's update rules (see shard_optim)."""

    def __init__(self, cfg: OptimConfig, variables: list[tf.Variable]) -> None:
        self.cfg = cfg
        self.slots: list[list[tf.Variable]] = []
        self.t = tf.Variable(0.0, dtype=tf.float32, trainable=False, name="adam_t")
        # The warm-up's rates (``lr_warmup``) as a table indexed in-graph by the update count
        # ``t``: the traced step applies the same float32 rates as the other optimizers.
        self._rates = None if warmup_of(cfg) is None else tf.constant(warmup_rates(cfg),
                                                                      tf.float32)
        if cfg.name == "momentum":
            self.slots = [[tf.Variable(tf.zeros_like(v), trainable=False)] for v in variables]
        elif cfg.name == "adam":
            self.slots = [[tf.Variable(tf.zeros_like(v), trainable=False),
                           tf.Variable(tf.zeros_like(v), trainable=False)] for v in variables]

    @property
    def variables(self) -> list[tf.Variable]:
        """Every state variable (for broadcasting optimizer state)."""
        return [self.t, *(s for slots in self.slots for s in slots)]

    def apply(self, grads: list[tf.Tensor], variables: list[tf.Variable]) -> None:
        """One update of ``variables`` from ``grads`` (traced inside the caller's function)."""
        c, lr, t = self.cfg, self.cfg.lr, None
        if self._rates is not None:  # t counts every kind's updates then, this one included
            t = self.t.assign_add(1.0)
            last = self._rates.shape[0] - 1
            lr = tf.gather(self._rates, tf.minimum(tf.cast(t, tf.int32) - 1, last))
        if c.name == "sgd":
            for g, v in zip(grads, variables, strict=True):
                v.assign_sub(lr * g)
            return
        if c.name == "momentum":
            for g, v, (buf,) in zip(grads, variables, self.slots, strict=True):
                buf.assign(c.momentum * buf + g)
                v.assign_sub(lr * buf)
            return
        b1, b2 = c.betas
        if t is None:
            t = self.t.assign_add(1.0)
        step_size = lr / (1.0 - tf.pow(b1, t))
        bc2_sqrt = tf.sqrt(1.0 - tf.pow(b2, t))
        for g, v, (m, s) in zip(grads, variables, self.slots, strict=True):
            m.assign(b1 * m + (1.0 - b1) * g)
            s.assign(b2 * s + (1.0 - b2) * g * g)
            v.assign_sub(step_size * m / (tf.sqrt(s) / bc2_sqrt + c.eps))
