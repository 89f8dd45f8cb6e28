"""TensorFlow adapter (``base.Adapter``): the model, its optimizer, and flat copies of both.

TensorFlow variables cannot alias numpy memory, so the flat buffers are copies: ``grads_buffer``
copies the gradients out (one concat per call), ``params_buffer`` the parameters, and
``params_changed`` assigns the buffer back into the variables. Only the parameter server uses
them, once per step each; Horovod and independent replicas never leave TensorFlow.

A whole training step (``train_step``; Horovod's ``reduced_step``) is ONE graph call: zeroing,
forward, backward, the gradients' reduction and the update are one ``tf.function`` (``step``
module), traced once for every batch shape (the input signature leaves batch and time dimensions
open). The protocol's separate calls (``zero_grad``, ``forward_backward``, ``step``: the
parameter server's path) are graph calls of their own, with the gradients kept in variables
between them. The optimizer (``TFOptimizer``, this package's ``optimizer`` module) has PyTorch's
update rules, so both frameworks and every strategy train the same function.

Horovod's TensorFlow integration (``HorovodTF`` in this package's ``horovod`` module) also uses
``variables``, ``optimizer_variables``, ``set_reduction`` and ``reduced_step``, documented below.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from hvdscale.config import ModelConfig, OptimConfig
from hvdscale.core.device import CPU, Placement
from hvdscale.corpora.corpus import Batch
from hvdscale.frameworks.embeddings import EmbeddingRows
from hvdscale.frameworks.shard_optim import NumpyShardOptimizer
from hvdscale.frameworks.tf.build import build, param_names, probe, shapes
from hvdscale.frameworks.tf.optimizer import TFOptimizer
from hvdscale.frameworks.tf.quiet import tf
from hvdscale.frameworks.tf.step import (
    LOCAL,
    Reduction,
    batch_inputs,
    batch_signature,
    build_train_step,
    stand_in_batch,
)
from hvdscale.models import ModelSizes
from hvdscale.models.custom import check_embeddings
from hvdscale.strategies.base import Scale
from hvdscale.strategies.sparse_rows import EmbeddingTable

FRAMEWORK = "tf"


class TFAdapter:
    """A TF model, its optimizer, and flat float32 copies of its parameters and gradients.

    Attributes used by Horovod's TensorFlow integration only: ``variables`` (in flat-buffer
    order, for ``hvd.broadcast_variables``), ``optimizer_variables``, ``set_reduction`` and
    ``reduced_step``.
    """

    framework = FRAMEWORK

    def __init__(self, model_cfg: ModelConfig, optim_cfg: OptimConfig, src_vocab: int,
                 tgt_vocab: int, placement: Placement = CPU) -> None:
        # The device was chosen by ``use_device`` (only one GPU is visible): TensorFlow places
        # the variables and the fused LSTM there, where it runs as the cuDNN kernel.
        self.placement = placement
        self.copy_s = 0.0
        """Seconds copying the flat buffers between the variables and numpy."""
        self.kind = model_cfg.data_kind
        """The batches the model takes (``nmt`` or ``lm``)."""
        self.model, tables = build(model_cfg,
                                   ModelSizes.from_config(model_cfg, src_vocab, tgt_vocab))
        if model_cfg.kind == "custom":  # the shipped models keep the contract by construction
            probe(model_cfg, self.model)
        self.variables: list[tf.Variable] = list(self.model.trainable_variables)  # torch order
        self._names = param_names(self.model)
        self._probe: Callable[..., Any] | None = None  # probe_grad's graph, traced on first use
        self._sizes = [int(np.prod(v.shape)) for v in self.variables]
        self.num_params = int(sum(self._sizes))
        self.optim_cfg = optim_cfg
        self.optimizer = TFOptimizer(optim_cfg, self.variables)
        rows = {"src": src_vocab, "tgt_in": tgt_vocab}
        if model_cfg.kind == "custom":
            check_embeddings(model_cfg, tables, self.param_shapes(), rows)
        self.embeddings = EmbeddingRows(tables, self.tensor_sizes(), rows)
        self._grads = [tf.Variable(tf.zeros_like(v), trainable=False) for v in self.variables]
        self._flat_params = np.zeros(self.num_params, dtype=np.float32)
        self._flat_grads = np.zeros(self.num_params, dtype=np.float32)
        self._stand_in = stand_in_batch(self.kind)
        self._local_step: Callable[..., tf.Tensor] | None = None
        self._reduced: Callable[..., tf.Tensor] | None = None
        self.compute_s = 0.0
        """Seconds in the traced forward/backward, or in the whole traced step (with Horovod
        its allreduces run inside that graph call, so this includes their waits)."""
        self._build()

    # --- the traced functions ----------------------------------------------------------------

    def _signature(self) -> list[tf.TensorSpec]:
        return [*batch_signature(), tf.TensorSpec([], tf.float32)]

    def _build(self) -> None:
        """Trace the protocol's separate calls (the fused steps are traced on first use)."""
        variables, grad_vars, model = self.variables, self._grads, self.model

        def forward_backward(src, src_len, tgt_in, tgt_out, tgt_len, scale):  # type: ignore[no-untyped-def]
            with tf.GradientTape() as tape:
                loss, _ = model(src, src_len, tgt_in, tgt_out, tgt_len)
                scaled = loss * scale
            grads = tape.gradient(scaled, variables)
            for gv, g in zip(grad_vars, grads, strict=True):
                # Accumulated, as PyTorch's autograd does (the protocol's contract). Embedding
                # gradients arrive as IndexedSlices (gathered rows): added densely.
                if g is not None:
                    gv.assign_add(tf.convert_to_tensor(g))
            return loss

        self._fb = tf.function(forward_backward, input_signature=self._signature())
        self._loss = tf.function(
            lambda src, src_len, tgt_in, tgt_out, tgt_len: model(src, src_len, tgt_in, tgt_out,
                                                                 tgt_len)[0],
            input_signature=self._signature()[:5])
        self._apply = tf.function(lambda: self.optimizer.apply(grad_vars, variables))
        self._zero = tf.function(lambda: [g.assign(tf.zeros_like(g)) for g in grad_vars])
        self._set_params = tf.function(
            self._assign_flat, input_signature=[tf.TensorSpec([self.num_params], tf.float32)])

    def _assign_flat(self, flat: tf.Tensor) -> None:
        for v, part in zip(self.variables, tf.split(flat, self._sizes), strict=True):
            v.assign(tf.reshape(part, v.shape))

    def set_reduction(self, reduction: Reduction) -> None:
        """The reduction ``reduced_step`` traces in (Horovod's token count and gradient
        allreduces); traced on the next step."""
        self._reduced = build_train_step(self.model, self.variables, self.optimizer, reduction)

    def reduced_step(self, batch: Batch | None, weight: float) -> float:
        """One token-weighted step in one graph call: the loss is scaled by ``weight`` /
        the reduced token count. ``None``: this rank has no batch; it computes exact zeros on a
        stand-in batch in the same collectives. Returns the unscaled loss (0.0 without batch).
        """
        if self._reduced is None:
            raise RuntimeError("set_reduction was not called before reduced_step")
        if batch is None:
            self._run(self._reduced, self._stand_in, 0.0, 0.0)
            return 0.0
        return self._run(self._reduced, batch, float(batch.loss_tokens), weight)

    def _run(self, step: Callable[..., tf.Tensor], batch: Batch, tokens: float,
             weight: float) -> float:
        t0 = time.perf_counter()
        loss = step(*batch_inputs(batch), tf.constant(tokens, tf.float64),
                    tf.constant(weight, tf.float64))
        value = float(loss)  # waits for the graph call to finish
        self.compute_s += time.perf_counter() - t0
        return value

    @property
    def optimizer_variables(self) -> list[tf.Variable]:
        return self.optimizer.variables

    # --- the protocol ------------------------------------------------------------------------

    def tensor_sizes(self) -> list[tuple[str, int]]:
        """(name, element count) of each parameter tensor, in flat-buffer order."""
        return list(zip(self._names, self._sizes, strict=True))

    def param_shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        """(name, shape) of each parameter tensor, in flat-buffer order."""
        return shapes(self.model)

    def _inputs(self, batch: Batch) -> list[Any]:
        return batch_inputs(batch)

    def train_signature(self) -> list[tf.TensorSpec]:
        """The train step's input signature (``train_inputs``, then a float32 loss scale), for
        a strategy that traces its own step (``mwms``)."""
        return self._signature()

    def train_inputs(self, batch: Batch) -> list[Any]:
        """``batch`` as the train step's inputs (int32 arrays, one signature for both models)."""
        return self._inputs(batch)

    def zero_grad(self) -> None:
        self._zero()

    def forward_backward(self, batch: Batch, scale: Scale) -> float:
        """Add the gradients of ``scale`` x the batch's summed token loss to the current ones;
        returns the unscaled loss.

        A callable ``scale`` is evaluated before the traced step (forward and backward are one
        graph call here, so the wait inside it cannot overlap the forward pass).
        """
        factor = scale() if callable(scale) else scale
        t0 = time.perf_counter()
        loss = self._fb(*self._inputs(batch), tf.constant(factor, tf.float32))
        value = float(loss)  # waits for the graph call to finish
        self.compute_s += time.perf_counter() - t0
        return value

    def train_step(self, batch: Batch, scale: Scale) -> float:
        """``zero_grad``, ``forward_backward(batch, scale)`` and ``step`` as ONE graph call
        (no reduction: independent replicas); returns the unscaled loss."""
        if self._local_step is None:
            self._local_step = build_train_step(self.model, self.variables, self.optimizer,
                                                LOCAL)
        factor = scale() if callable(scale) else scale
        return self._run(self._local_step, batch, 1.0, factor)

    def loss(self, batch: Batch) -> float:
        return float(self._loss(*self._inputs(batch)))

    def probe_grad(self, batch: Batch) -> np.ndarray:
        """Gradient of the batch's summed token loss, flat float64 in ``tensor_sizes`` order.

        A plain tape of its own (never Horovod's): nothing accumulates, nothing communicates
        (gradient noise scale, issue 33). Embedding IndexedSlices are densified.
        """
        if self._probe is None:
            variables, model = self.variables, self.model

            def probe(src, src_len, tgt_in, tgt_out, tgt_len):  # type: ignore[no-untyped-def]
                with tf.GradientTape() as tape:
                    loss, _ = model(src, src_len, tgt_in, tgt_out, tgt_len)
                grads = tape.gradient(loss, variables)
                return [tf.reshape(tf.zeros_like(v) if g is None else tf.convert_to_tensor(g),
                                   [-1]) for v, g in zip(variables, grads, strict=True)]

            self._probe = tf.function(probe, input_signature=self._signature()[:5])
        parts = self._probe(*self._inputs(batch))
        return np.concatenate([p.numpy().astype(np.float64) for p in parts])

    def step(self) -> None:
        self._apply()

    def params_buffer(self) -> np.ndarray:
        """The parameters copied into one flat float32 array (the same array each call)."""
        t = time.perf_counter()
        np.copyto(self._flat_params, tf.concat([tf.reshape(v, [-1]) for v in self.variables],
                                               0).numpy())
        self.copy_s += time.perf_counter() - t
        return self._flat_params

    def params_changed(self) -> None:
        """Assign the values written into ``params_buffer()`` to the variables (a copy)."""
        t = time.perf_counter()
        self._set_params(tf.constant(self._flat_params))
        self.synchronize()
        self.copy_s += time.perf_counter() - t

    def grads_buffer(self) -> np.ndarray:
        """The current gradients copied into one flat float32 array (the same array)."""
        t = time.perf_counter()
        np.copyto(self._flat_grads, tf.concat([tf.reshape(g, [-1]) for g in self._grads],
                                              0).numpy())
        self.copy_s += time.perf_counter() - t
        return self._flat_grads

    def synchronize(self) -> None:
        """Wait for the work queued on the GPU (nothing on CPU, where ops run to completion)."""
        if self.placement.kind == "cuda":
            tf.test.experimental.sync_devices()

    def device_stats(self) -> dict[str, Any]:
        """Placement, flat-buffer copy seconds, and peak GPU memory in MiB (None on CPU)."""
        peak = None
        if self.placement.kind == "cuda":
            peak = tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20
        return {**self.placement.to_dict(), "copy_s": self.copy_s, "peak_gpu_mem_mb": peak}

    def shard_optimizer(self, shard: np.ndarray) -> NumpyShardOptimizer:
        """The run's optimizer over a flat numpy shard (same rules as ``TFOptimizer``)."""
        return NumpyShardOptimizer(shard, self.optim_cfg)

    def embedding_tables(self) -> list[EmbeddingTable]:
        """The embedding tables in the flat buffers (``base.Adapter``)."""
        return self.embeddings.tables

    def touched_rows(self, batch: Batch) -> list[np.ndarray]:
        """Per embedding table, the rows ``batch`` looks up: the ids of its IndexedSlices
        gradients (``base.Adapter``)."""
        return self.embeddings.touched(batch)

    def fingerprint(self) -> dict[str, float]:
        p = self.params_buffer().astype(np.float64)
        return {"sum": float(p.sum()), "l2": float(np.linalg.norm(p))}


def make_adapter(model_cfg: ModelConfig, optim_cfg: OptimConfig, src_vocab: int, tgt_vocab: int,
                 placement: Placement = CPU, precision: str = "fp32") -> TFAdapter:
    """The TensorFlow adapter for a run (see ``hvdscale.frameworks.base.Framework``); fp32 only
    (``RunConfig`` refuses any other ``precision`` for TensorFlow)."""
    return TFAdapter(model_cfg, optim_cfg, src_vocab, tgt_vocab, placement)


def tensor_sizes(model_cfg: ModelConfig, src_vocab: int, tgt_vocab: int) -> list[tuple[str, int]]:
    """(name, element count) of each parameter tensor, in flat-buffer order (see
    ``hvdscale.frameworks.base.Framework``): the same layout as the PyTorch twin's. The model is
    built (its variables allocated) and dropped: TensorFlow has no shapes-only build."""
    model, _ = build(model_cfg, ModelSizes.from_config(model_cfg, src_vocab, tgt_vocab))
    return [(n, int(np.prod(s))) for n, s in shapes(model)]
