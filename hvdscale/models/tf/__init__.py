"""TensorFlow RNN models (``hvdscale.models.tf``); no distribution code in here.

The same networks as ``hvdscale.models.torch``, with PyTorch's parameter names, shapes and
order: ``model.trainable_variables`` lines up one to one with the PyTorch model's
``parameters()`` (``model.param_names()`` gives the dotted names), so the two frameworks' flat
parameter and gradient buffers match element for element. A model's call takes a batch's padded
arrays and returns (summed token loss as a float32 scalar, number of real target tokens).
"""

from __future__ import annotations

import numpy as np

from hvdscale.models import ModelSizes
from hvdscale.models.tf.lstm import LSTMStack
from hvdscale.models.tf.nmt import NMTModel
from hvdscale.models.tf.params import OrderedModule
from hvdscale.models.tf.rnnlm import RNNLM


def build_model(kind: str, rnn_impl: str, sizes: ModelSizes, seed: int) -> OrderedModule:
    """The model named by ``kind`` (``nmt`` or ``lm``), initial values drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    if kind == "nmt":
        return NMTModel(sizes, rnn_impl, rng)
    if kind == "lm":
        return RNNLM(sizes.src_vocab, sizes.embed_dim, sizes.hidden_size, sizes.encoder_layers,
                     rnn_impl, rng)
    raise ValueError(f"unknown model kind {kind!r}")


__all__ = ["RNNLM", "LSTMStack", "NMTModel", "build_model"]
