"""Seq2seq LSTM translation model of the seed notes (no distribution code here).

Embedding, (bidirectional) LSTM encoder, LSTM decoder initialised from the encoder's final
states, optional Luong dot attention over the encoder outputs, softmax projection. The forward
pass returns the summed token cross-entropy over real target tokens and their count: the
token-weighted update is then exact however batches are split across ranks.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from hvdscale.models import ModelSizes
from hvdscale.models.torch.lstm import State, make_lstm


class NMTModel(nn.Module):
    """Encoder-decoder LSTM; see the module docstring."""

    def __init__(self, sizes: ModelSizes, rnn_impl: str) -> None:
        super().__init__()
        s = sizes
        self.bidirectional = s.bidirectional
        self.attention = s.attention
        self.encoder_layers = s.encoder_layers
        self.decoder_layers = s.decoder_layers
        enc_hidden = s.hidden_size // 2 if s.bidirectional else s.hidden_size
        self.src_embed = nn.Embedding(s.src_vocab, s.embed_dim, padding_idx=0)
        self.tgt_embed = nn.Embedding(s.tgt_vocab, s.embed_dim, padding_idx=0)
        self.encoder = make_lstm(rnn_impl, s.embed_dim, enc_hidden, s.encoder_layers,
                                 s.bidirectional)
        self.decoder = make_lstm(rnn_impl, s.embed_dim, s.hidden_size, s.decoder_layers, False)
        if s.attention:
            self.attn_out = nn.Linear(2 * s.hidden_size, s.hidden_size, bias=False)
        self.proj = nn.Linear(s.hidden_size, s.tgt_vocab)

    def _bridge(self, state: State) -> State | None:
        """Encoder final states as decoder initial states (layer k to layer k)."""
        if self.encoder_layers != self.decoder_layers:
            return None
        h, c = state
        if self.bidirectional:
            # [layers*2, B, H/2] -> [layers, B, H]: forward and backward halves side by side.
            def merge(x: torch.Tensor) -> torch.Tensor:
                x = x.view(self.encoder_layers, 2, x.shape[1], x.shape[2])
                return torch.cat((x[:, 0], x[:, 1]), dim=2)

            return merge(h), merge(c)
        return h, c

    def forward(self, src: torch.Tensor, src_len: torch.Tensor, tgt_in: torch.Tensor,
                tgt_out: torch.Tensor, tgt_len: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (summed token loss, number of real target tokens)."""
        enc_out, enc_state = self.encoder(self.src_embed(src), src_len)
        dec_out, _ = self.decoder(self.tgt_embed(tgt_in), tgt_len, self._bridge(enc_state))
        if self.attention:
            scores = torch.bmm(dec_out, enc_out.transpose(1, 2))  # [B, T, S]
            steps = torch.arange(src.shape[1], device=src.device)
            src_mask = steps.unsqueeze(0) < src_len.unsqueeze(1)
            scores = scores.masked_fill(~src_mask.unsqueeze(1), float("-inf"))
            context = torch.bmm(torch.softmax(scores, dim=-1), enc_out)
            dec_out = torch.tanh(self.attn_out(torch.cat((context, dec_out), dim=-1)))
        logits = self.proj(dec_out)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                               ignore_index=0, reduction="sum")
        return loss, tgt_len.sum()
