"""Parameter layout of the TensorFlow models: PyTorch's order, names, shapes and initialisers.

``tf.Module`` lists its variables sorted by attribute name, which would put ``decoder`` before
``encoder`` before ``src_embed``. ``OrderedModule`` instead lists them in the order they were
registered, and every model registers them in the order of the PyTorch twin's
``parameters()``, under the same dotted names. The flat parameter and gradient buffers of the
two frameworks then line up element for element (the adapters and the cross-framework tests
rely on it).
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf


class OrderedModule(tf.Module):
    """A ``tf.Module`` whose ``variables`` and ``trainable_variables`` keep registration order."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name=name)
        self._param_names: list[str] = []
        self._params: list[tf.Variable] = []

    def add_param(self, name: str, value: np.ndarray) -> tf.Variable:
        """Create a float32 variable named ``name`` (PyTorch's dotted name) and register it."""
        var = tf.Variable(value.astype(np.float32), name=name, trainable=True)
        self._param_names.append(name)
        self._params.append(var)
        return var

    def add_params_of(self, prefix: str, module: OrderedModule) -> None:
        """Register a submodule's variables, in its order, under ``prefix.``."""
        for name, var in module.named_parameters():
            self._param_names.append(f"{prefix}.{name}")
            self._params.append(var)

    def named_parameters(self) -> list[tuple[str, tf.Variable]]:
        """(PyTorch-style dotted name, variable), in PyTorch's ``parameters()`` order."""
        return list(zip(self._param_names, self._params, strict=True))

    def param_names(self) -> list[str]:
        """PyTorch-style dotted names, in the order of ``trainable_variables``."""
        return list(self._param_names)

    @property
    def variables(self) -> tuple[tf.Variable, ...]:
        """All variables, in PyTorch's ``parameters()`` order (not attribute-name order)."""
        return tuple(self._params)

    @property
    def trainable_variables(self) -> tuple[tf.Variable, ...]:
        """Same as ``variables``: every variable of these models is trainable."""
        return tuple(self._params)


def uniform(rng: np.random.Generator, shape: tuple[int, ...], bound: float) -> np.ndarray:
    """U(-bound, bound) values, as PyTorch's LSTM and Linear initialisers draw them."""
    return rng.uniform(-bound, bound, size=shape)


def embedding_init(rng: np.random.Generator, vocab: int, dim: int) -> np.ndarray:
    """N(0, 1) with the padding row (id 0) zero, as ``nn.Embedding(padding_idx=0)``."""
    w = rng.standard_normal((vocab, dim))
    w[0] = 0.0
    return w


def linear_bound(in_features: int) -> float:
    """PyTorch's ``nn.Linear`` default bound for weight and bias: 1/sqrt(in_features)."""
    return 1.0 / math.sqrt(in_features)


def linear(x: tf.Tensor, weight: tf.Variable, bias: tf.Variable | None = None) -> tf.Tensor:
    """``x @ weight^T + bias`` over the last axis, with ``weight`` laid out [out, in]."""
    shape = tf.shape(x)
    y = tf.matmul(tf.reshape(x, [-1, shape[-1]]), weight, transpose_b=True)
    if bias is not None:
        y = y + bias
    return tf.reshape(y, tf.concat([shape[:-1], tf.shape(weight)[:1]], 0))
