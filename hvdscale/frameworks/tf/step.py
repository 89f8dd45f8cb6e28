"""One TensorFlow training step as ONE traced function: the token count, forward, backward, the
gradients' reduction and the optimizer's update, with no eager work between them.

What a strategy changes is a ``Reduction``: how this rank's loss-token count becomes the count
the loss is divided by, a wrapper of the gradient tape (Horovod's ``DistributedGradientTape``),
and a function of the gradient list (one allreduce of all of them after the backward pass, or a
replica context's all-reduce). The default reduces nothing: a local step (independent
replicas). ``step_body`` is the untraced body; ``build_train_step`` traces it once for every
batch shape. MultiWorkerMirroredStrategy (frameworks/tf/mwms.py) does not use it: its step is
its token count's graph call, then ``strategy.run`` of its own replica function (two calls).

The loss scale is ``weight / total_tokens``, divided in float64 and rounded once to float32 (the
value the eager path passed). A rank without a batch runs the step on a stand-in batch with
weight 0 and 0 tokens: its gradients are exact zeros in the same collectives. When the total is
0 (no rank has a batch) the update is skipped, optimizer state included, as one process would.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from hvdscale.corpora.corpus import Batch, collate
from hvdscale.frameworks.tf.quiet import tf

TapeWrapper = Callable[[tf.GradientTape], tf.GradientTape]
GradReduce = Callable[[list[tf.Tensor]], list[tf.Tensor]]
TokenReduce = Callable[[tf.Tensor], tf.Tensor]


@dataclass(frozen=True)
class Reduction:
    """How one traced step turns this rank's gradients into the update's (all traced)."""

    tokens: TokenReduce | None = None
    """This rank's loss tokens (a float64 scalar) to the count the loss is divided by (the
    global count: an allreduce); None: this rank's own count."""
    wrap_tape: TapeWrapper | None = None
    """Wraps the gradient tape, so each gradient is reduced as the backward pass makes it."""
    reduce_grads: GradReduce | None = None
    """The dense gradients (one per variable) to the reduced ones, after the backward pass."""


LOCAL = Reduction()
"""No communication: the step of one process (or of independent replicas)."""


def batch_signature() -> list[tf.TensorSpec]:
    """Input signature of a batch (``batch_inputs``): batch and time dimensions left open."""
    # int32 ids and lengths: TensorFlow's native index type; no vocabulary or sentence comes
    # near 2**31.
    mat = tf.TensorSpec([None, None], tf.int32)
    vec = tf.TensorSpec([None], tf.int32)
    return [mat, vec, mat, mat, vec]


def step_signature() -> list[tf.TensorSpec]:
    """Input signature of the train step: the batch, then float64 loss tokens and weight."""
    return [*batch_signature(), tf.TensorSpec([], tf.float64), tf.TensorSpec([], tf.float64)]


def batch_inputs(batch: Batch) -> list[np.ndarray]:
    """``batch`` as int32 arrays in ``batch_signature`` order."""
    # The lm has no decoder input: an empty matrix keeps one signature for both models.
    tgt_in = batch.tgt_in if batch.tgt_in is not None else np.zeros((0, 0), np.int32)
    return [np.asarray(a, np.int32) for a in (batch.src, batch.src_len, tgt_in,
                                               batch.tgt_out, batch.tgt_len)]


def stand_in_batch(kind: str) -> Batch:
    """The batch a rank without one computes on (weight 0): one sentence of two tokens."""
    sent = np.array([4, 4], dtype=np.int64)  # the first non-special token id, twice
    return collate([sent], None if kind == "lm" else [sent], kind)


def dense_grads(grads: list[Any], variables: list[tf.Variable]) -> list[tf.Tensor]:
    """Gradients as dense tensors, zeros where a variable got none (traced).

    Embedding gradients arrive as IndexedSlices (gathered rows, repeated ids summed here)."""
    return [tf.convert_to_tensor(g) if g is not None else tf.zeros_like(v)
            for g, v in zip(grads, variables, strict=True)]


def step_body(model: Any, variables: list[tf.Variable], optimizer: Any,
              reduction: Reduction = LOCAL) -> Callable[..., tf.Tensor]:
    """The untraced train step over ``step_signature`` inputs; returns the unscaled loss.

    ``optimizer.apply(grads, variables)`` is the update (traced into the same function).
    """
    def body(src: tf.Tensor, src_len: tf.Tensor, tgt_in: tf.Tensor, tgt_out: tf.Tensor,
             tgt_len: tf.Tensor, tokens: tf.Tensor, weight: tf.Tensor) -> tf.Tensor:
        # Issued first and needed only by the backward pass: the count's collective runs
        # while the forward pass computes.
        total = reduction.tokens(tokens) if reduction.tokens is not None else tokens
        scale = tf.cast(tf.math.divide_no_nan(weight, total), tf.float32)
        with tf.GradientTape() as tape:
            loss, _ = model(src, src_len, tgt_in, tgt_out, tgt_len)
            scaled = loss * scale
        if reduction.wrap_tape is not None:
            tape = reduction.wrap_tape(tape)
        grads = dense_grads(tape.gradient(scaled, variables), variables)
        if reduction.reduce_grads is not None:
            grads = reduction.reduce_grads(grads)

        def update() -> tf.Tensor:
            optimizer.apply(grads, variables)
            return tf.constant(True)

        # Every rank sees the same total, so every rank takes the same branch.
        tf.cond(total > 0, update, lambda: tf.constant(False))
        return loss

    return body


def build_train_step(model: Any, variables: list[tf.Variable], optimizer: Any,
                     reduction: Reduction = LOCAL) -> Callable[..., tf.Tensor]:
    """``step_body`` traced once for every batch shape (one graph call per step)."""
    return tf.function(step_body(model, variables, optimizer, reduction),
                       input_signature=step_signature())
