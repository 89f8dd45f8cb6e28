"""The RNN models, one subpackage per framework; no distribution code anywhere in here.

``hvdscale.models.torch`` holds the PyTorch models and ``hvdscale.models.tf`` the TensorFlow
ones, with the same architectures, sizes and parameter layout. This package imports neither
framework, so a TensorFlow run never loads torch and a PyTorch run never loads tensorflow.
A model's forward takes a batch's padded arrays and returns (summed token loss, token count).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hvdscale.config import ModelConfig


@dataclass(frozen=True)
class ModelSizes:
    """What fixes a model's parameter shapes: vocabularies, widths, depths and the encoder's
    and attention's presence. The same for both frameworks' builders."""

    src_vocab: int
    tgt_vocab: int
    embed_dim: int
    hidden_size: int
    encoder_layers: int
    decoder_layers: int
    bidirectional: bool
    attention: bool

    @classmethod
    def from_config(cls, model: ModelConfig, src_vocab: int, tgt_vocab: int) -> ModelSizes:
        """The sizes of ``model`` with the vocabulary sizes in use (from the config or the
        data: a config's 0 means "take it from the data", so the caller passes them)."""
        return cls(src_vocab, tgt_vocab, model.embed_dim, model.hidden_size,
                   model.encoder_layers, model.decoder_layers, model.bidirectional,
                   model.attention)


EMBEDDING_INPUTS: dict[str, dict[str, str]] = {
    "nmt": {"src_embed.weight": "src", "tgt_embed.weight": "tgt_in"},
    "lm": {"embed.weight": "src"},
}
"""Per model kind, each embedding table's parameter name (the same in both frameworks) and the
batch field whose token ids it looks up: a step's gradient is nonzero only in those rows."""


__all__ = ["EMBEDDING_INPUTS", "ModelSizes"]
