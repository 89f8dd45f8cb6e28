"""TensorFlow builders that break the custom-model contract, each in one way (the refusal
tests)."""

import numpy as np
import tensorflow as tf

EMBEDDINGS = {"embed": "src"}


class TinyLM(tf.Module):
    """A bag-of-embeddings LM; ``loss``/``count`` choose what the call returns."""

    def __init__(self, vocab: int, dim: int, seed: int, loss: str = "sum",
                 count: str = "int", trainable: bool = True) -> None:
        super().__init__()
        rng = np.random.default_rng(seed)
        self.embed = tf.Variable(rng.normal(0, 0.1, (vocab, dim)).astype(np.float32),
                                 trainable=trainable, name="embed")
        self.proj = tf.Variable(rng.normal(0, 0.1, (dim, vocab)).astype(np.float32),
                                trainable=trainable, name="proj")
        self.loss_kind, self.count_kind = loss, count

    def __call__(self, src, src_len, tgt_in, tgt_out, tgt_len):
        logits = tf.tensordot(tf.gather(self.embed, src), self.proj, axes=1)
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tgt_out, logits=logits)
        ce = tf.where(tgt_out != 0, ce, tf.zeros_like(ce))
        loss = ce if self.loss_kind == "matrix" else tf.reduce_sum(ce)
        count = tf.reduce_sum(tgt_len)
        return loss, tf.cast(count, tf.float32) if self.count_kind == "float" else count


def good(sizes, rnn_impl, seed):
    return TinyLM(sizes.src_vocab, sizes.embed_dim, seed)


def not_module(sizes, rnn_impl, seed):
    return [tf.Variable(tf.zeros([3]))]


def matrix_loss(sizes, rnn_impl, seed):
    return TinyLM(sizes.src_vocab, sizes.embed_dim, seed, loss="matrix")


def float_count(sizes, rnn_impl, seed):
    return TinyLM(sizes.src_vocab, sizes.embed_dim, seed, count="float")


def frozen(sizes, rnn_impl, seed):
    return TinyLM(sizes.src_vocab, sizes.embed_dim, seed, trainable=False)
