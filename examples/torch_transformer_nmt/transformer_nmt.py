"""A small PyTorch Transformer encoder-decoder (NMT) for hvdscale (model.kind: custom).

Same contract as the shipped LSTMs (forward(src, src_len, tgt_in, tgt_out, tgt_len) ->
(summed token loss, token count)), to show it is not tied to recurrent layers. Padding is
masked out of attention and of the loss, so a token's loss does not depend on how wide the
batch was padded: hvdscale's token-weighted update stays exact however batches are split.
"""

import math

import torch
from torch import nn
from torch.nn import functional as F

EMBEDDINGS = {"src_embed.weight": "src", "tgt_embed.weight": "tgt_in"}
MAX_LEN = 256


class TransformerNMT(nn.Module):
    def __init__(self, sizes) -> None:
        super().__init__()
        d = sizes.hidden_size
        self.scale = math.sqrt(d)
        self.src_embed = nn.Embedding(sizes.src_vocab, d, padding_idx=0)
        self.tgt_embed = nn.Embedding(sizes.tgt_vocab, d, padding_idx=0)
        self.pos = nn.Embedding(MAX_LEN, d)
        self.core = nn.Transformer(d_model=d, nhead=4, num_encoder_layers=sizes.encoder_layers,
                                   num_decoder_layers=sizes.decoder_layers,
                                   dim_feedforward=2 * d, dropout=0.0, batch_first=True)
        self.proj = nn.Linear(d, sizes.tgt_vocab)

    def _embed(self, table, ids):
        steps = torch.arange(ids.shape[1], device=ids.device)
        return table(ids) * self.scale + self.pos(steps)[None]

    def forward(self, src, src_len, tgt_in, tgt_out, tgt_len):
        src_pad = torch.arange(src.shape[1], device=src.device)[None] >= src_len[:, None]
        tgt_pad = torch.arange(tgt_in.shape[1], device=src.device)[None] >= tgt_len[:, None]
        t = tgt_in.shape[1]  # a position sees itself and earlier ones only
        causal = torch.ones(t, t, dtype=torch.bool, device=src.device).triu(1)
        out = self.core(self._embed(self.src_embed, src), self._embed(self.tgt_embed, tgt_in),
                        tgt_mask=causal, src_key_padding_mask=src_pad,
                        tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad,
                        tgt_is_causal=True)
        logits = self.proj(out)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=0,
                               reduction="sum")
        return loss, tgt_len.sum()


def build(sizes, rnn_impl):
    return TransformerNMT(sizes)
