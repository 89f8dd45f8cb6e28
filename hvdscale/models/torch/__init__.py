"""PyTorch RNN models (``hvdscale.models.torch``); no distribution code in here.

A model's forward takes a batch's padded tensors and returns (summed token loss, token count).
"""

from __future__ import annotations

from torch import nn

from hvdscale.models import ModelSizes
from hvdscale.models.torch.nmt import NMTModel
from hvdscale.models.torch.rnnlm import RNNLM


def build_model(kind: str, rnn_impl: str, sizes: ModelSizes) -> nn.Module:
    """The model named by ``kind`` (``nmt`` or ``lm``) with the given sizes."""
    if kind == "nmt":
        return NMTModel(sizes, rnn_impl)
    if kind == "lm":
        return RNNLM(sizes.src_vocab, sizes.embed_dim, sizes.hidden_size, sizes.encoder_layers,
                     rnn_impl)
    raise ValueError(f"unknown model kind {kind!r}")


__all__ = ["RNNLM", "NMTModel", "build_model"]
