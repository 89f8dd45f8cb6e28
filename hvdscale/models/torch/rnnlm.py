"""RNN language model of the seed notes (no distribution code here)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from hvdscale.models.torch.lstm import make_lstm


class RNNLM(nn.Module):
    """Embedding, LSTM layers, softmax projection; predicts the next token."""

    def __init__(self, vocab: int, embed_dim: int, hidden_size: int, num_layers: int,
                 rnn_impl: str) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, embed_dim, padding_idx=0)
        self.rnn = make_lstm(rnn_impl, embed_dim, hidden_size, num_layers, False)
        self.proj = nn.Linear(hidden_size, vocab)

    def forward(self, src: torch.Tensor, src_len: torch.Tensor, tgt_in: torch.Tensor | None,
                tgt_out: torch.Tensor, tgt_len: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (summed token loss, number of real target tokens); ``tgt_in`` is unused."""
        out, _ = self.rnn(self.embed(src), src_len)
        logits = self.proj(out)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                               ignore_index=0, reduction="sum")
        return loss, tgt_len.sum()
