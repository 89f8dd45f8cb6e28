"""A builder whose EMBEDDINGS declaration names a parameter the model does not have."""

from custom_torch import TinyLM

EMBEDDINGS = {"encoder.embedding.weight": "src"}


def build(sizes, rnn_impl):
    return TinyLM(sizes.src_vocab, sizes.embed_dim)
