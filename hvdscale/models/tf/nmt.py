"""Seq2seq LSTM translation model of the seed notes, for TensorFlow (no distribution code).

The same network as ``hvdscale.models.torch.nmt.NMTModel``: embeddings (padding id 0), a
(bidirectional) LSTM encoder with H/2 per direction, an LSTM decoder initialised from the
encoder's final states, optional Luong dot attention over the encoder outputs, softmax
projection; the call returns the summed token cross-entropy over real target tokens and their
count. Parameters, names and order are the PyTorch model's (see ``params.py``).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from hvdscale.models import ModelSizes
from hvdscale.models.tf.lstm import LSTMStack, State
from hvdscale.models.tf.params import OrderedModule, embedding_init, linear, linear_bound, uniform


def summed_token_loss(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    """Cross-entropy summed over positions whose label is not padding (id 0), float32.

    As PyTorch's ``cross_entropy(..., ignore_index=0, reduction="sum")``.
    """
    logits = tf.reshape(logits, [-1, tf.shape(logits)[-1]])
    labels = tf.reshape(labels, [-1])
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    return tf.reduce_sum(tf.where(labels != 0, ce, tf.zeros_like(ce)))


def embed_time_major(table: tf.Variable, ids: tf.Tensor) -> tf.Tensor:
    """Embeddings of ids [B, T] as [T, B, E] (gradient: tf.IndexedSlices).

    Gather first, then transpose the floats: transposing the integer ids instead makes oneDNN
    log an error-level line ("oneDNN supports DT_INT64 only on platforms with AVX-512") in
    every process on this machine's CPUs.
    """
    return tf.transpose(tf.gather(table, ids), [1, 0, 2])


class NMTModel(OrderedModule):
    """Encoder-decoder LSTM; see the module docstring. ``rng`` draws the initial values."""

    def __init__(self, sizes: ModelSizes, rnn_impl: str, rng: np.random.Generator) -> None:
        super().__init__(name="nmt")
        s = sizes
        self.bidirectional = s.bidirectional
        self.attention = s.attention
        self.encoder_layers = s.encoder_layers
        self.decoder_layers = s.decoder_layers
        hidden = s.hidden_size
        enc_hidden = hidden // 2 if s.bidirectional else hidden
        # Registered (and drawn) in NMTModel.parameters() order: src_embed, tgt_embed, encoder,
        # decoder, attn_out, proj.
        self.src_embed = self.add_param("src_embed.weight",
                                        embedding_init(rng, s.src_vocab, s.embed_dim))
        self.tgt_embed = self.add_param("tgt_embed.weight",
                                        embedding_init(rng, s.tgt_vocab, s.embed_dim))
        self.encoder = LSTMStack(rnn_impl, s.embed_dim, enc_hidden, s.encoder_layers,
                                 s.bidirectional, rng, name="encoder")
        self.add_params_of("encoder", self.encoder)
        self.decoder = LSTMStack(rnn_impl, s.embed_dim, hidden, s.decoder_layers, False, rng,
                                 name="decoder")
        self.add_params_of("decoder", self.decoder)
        if s.attention:
            self.attn_out = self.add_param(
                "attn_out.weight",
                uniform(rng, (hidden, 2 * hidden), linear_bound(2 * hidden)))
        bound = linear_bound(hidden)
        self.proj_w = self.add_param("proj.weight", uniform(rng, (s.tgt_vocab, hidden), bound))
        self.proj_b = self.add_param("proj.bias", uniform(rng, (s.tgt_vocab,), bound))

    def _bridge(self, state: State) -> State | None:
        """Encoder final states as decoder initial states (layer k to layer k)."""
        if self.encoder_layers != self.decoder_layers:
            return None
        h, c = state
        if not self.bidirectional:
            return h, c

        # [layers*2, B, H/2] -> [layers, B, H]: forward and backward halves side by side.
        def merge(x: tf.Tensor) -> tf.Tensor:
            x = tf.reshape(x, tf.concat([[self.encoder_layers, 2], tf.shape(x)[1:]], 0))
            return tf.concat([x[:, 0], x[:, 1]], axis=2)

        return merge(h), merge(c)

    def __call__(self, src: tf.Tensor, src_len: tf.Tensor, tgt_in: tf.Tensor,
                 tgt_out: tf.Tensor, tgt_len: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Returns (summed token loss, number of real target tokens).

        ``src`` [B, S], ``tgt_in``/``tgt_out`` [B, T] padded with 0, ``*_len`` [B]; any batch
        and time sizes (one ``tf.function`` trace with [None, None] signatures serves all).
        """
        src_len32 = tf.cast(src_len, tf.int32)
        tgt_len32 = tf.cast(tgt_len, tf.int32)
        # The LSTMs run time-major; attention and the loss run batch-major like the inputs.
        enc_out, enc_state = self.encoder(embed_time_major(self.src_embed, src), src_len32)
        dec_out, _ = self.decoder(embed_time_major(self.tgt_embed, tgt_in), tgt_len32,
                                  self._bridge(enc_state))
        out = tf.transpose(dec_out, [1, 0, 2])  # [B, T, H]
        if self.attention:
            scores = tf.einsum("bth,sbh->bts", out, enc_out)
            src_mask = tf.range(tf.shape(src)[1])[tf.newaxis, :] < src_len32[:, tf.newaxis]
            scores = tf.where(src_mask[:, tf.newaxis, :], scores,
                              tf.constant(-np.inf, scores.dtype))
            context = tf.einsum("bts,sbh->bth", tf.nn.softmax(scores, axis=-1), enc_out)
            out = tf.tanh(linear(tf.concat([context, out], axis=-1), self.attn_out))
        with tf.name_scope("proj"):  # the softmax projection and loss, named for profiles
            logits = linear(out, self.proj_w, self.proj_b)
            loss = summed_token_loss(logits, tgt_out)
        return loss, tf.reduce_sum(tgt_len)
