"""RNN language model of the seed notes, for TensorFlow (no distribution code here).

The same network as ``hvdscale.models.torch.rnnlm.RNNLM``: embedding (padding id 0), LSTM
layers, softmax projection, with the PyTorch model's parameter names and order.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from hvdscale.models.tf.lstm import LSTMStack
from hvdscale.models.tf.nmt import embed_time_major, summed_token_loss
from hvdscale.models.tf.params import OrderedModule, embedding_init, linear, linear_bound, uniform


class RNNLM(OrderedModule):
    """Embedding, LSTM layers, softmax projection; predicts the next token."""

    def __init__(self, vocab: int, embed_dim: int, hidden_size: int, num_layers: int,
                 rnn_impl: str, rng: np.random.Generator) -> None:
        super().__init__(name="rnnlm")
        # Registered (and drawn) in RNNLM.parameters() order: embed, rnn, proj.
        self.embed = self.add_param("embed.weight", embedding_init(rng, vocab, embed_dim))
        self.rnn = LSTMStack(rnn_impl, embed_dim, hidden_size, num_layers, False, rng,
                             name="rnn")
        self.add_params_of("rnn", self.rnn)
        bound = linear_bound(hidden_size)
        self.proj_w = self.add_param("proj.weight", uniform(rng, (vocab, hidden_size), bound))
        self.proj_b = self.add_param("proj.bias", uniform(rng, (vocab,), bound))

    def __call__(self, src: tf.Tensor, src_len: tf.Tensor, tgt_in: tf.Tensor | None,
                 tgt_out: tf.Tensor, tgt_len: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Returns (summed token loss, number of real target tokens); ``tgt_in`` is unused."""
        out, _ = self.rnn(embed_time_major(self.embed, src), tf.cast(src_len, tf.int32))
        with tf.name_scope("proj"):  # the softmax projection and loss, named for profiles
            logits = linear(tf.transpose(out, [1, 0, 2]), self.proj_w, self.proj_b)
            loss = summed_token_loss(logits, tgt_out)
        return loss, tf.reduce_sum(tgt_len)
