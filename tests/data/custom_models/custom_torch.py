"""PyTorch builders that break the custom-model contract, each in one way (the refusal tests;
``rank1_*`` break it only on the rank whose OMPI_COMM_WORLD_RANK is 1)."""

import os

import torch
from torch import nn
from torch.nn import functional as F

EMBEDDINGS = {"embed.weight": "src"}


def _rank() -> str:
    return os.environ.get("OMPI_COMM_WORLD_RANK", "0")


class TinyLM(nn.Module):
    """A bag-of-embeddings LM; ``loss_shape``/``count`` choose what forward returns."""

    def __init__(self, vocab: int, dim: int, loss: str = "sum", count: str = "int") -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=0)
        self.proj = nn.Linear(dim, vocab)
        self.loss_kind, self.count_kind = loss, count

    def forward(self, src, src_len, tgt_in, tgt_out, tgt_len):
        logits = self.proj(self.embed(src))
        per_token = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=0,
                                    reduction="none").view_as(tgt_out)
        loss = per_token if self.loss_kind == "matrix" else per_token.sum()
        count = tgt_len.sum().float() if self.count_kind == "float" else tgt_len.sum()
        return loss, count


def good(sizes, rnn_impl):
    return TinyLM(sizes.src_vocab, sizes.embed_dim)


def not_module(sizes, rnn_impl):
    return {"embed": torch.zeros(sizes.src_vocab, sizes.embed_dim)}


def matrix_loss(sizes, rnn_impl):
    return TinyLM(sizes.src_vocab, sizes.embed_dim, loss="matrix")


def float_count(sizes, rnn_impl):
    return TinyLM(sizes.src_vocab, sizes.embed_dim, count="float")


def frozen(sizes, rnn_impl):
    model = TinyLM(sizes.src_vocab, sizes.embed_dim)
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def raises(sizes, rnn_impl):
    raise ValueError("hidden_size too small for this model")


def rank1_shapes(sizes, rnn_impl):
    return TinyLM(sizes.src_vocab, sizes.embed_dim + (1 if _rank() == "1" else 0))


def rank1_matrix_loss(sizes, rnn_impl):
    return TinyLM(sizes.src_vocab, sizes.embed_dim, loss="matrix" if _rank() == "1" else "sum")
