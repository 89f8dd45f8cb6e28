"""A TensorFlow GRU language model for hvdscale (model.kind: custom, framework: tf).

``build(sizes, rnn_impl, seed)`` returns a ``tf.Module`` holding its trainable variables; its
call takes the batch's padded int32 arrays and returns (summed token loss, token count). The
call is traced by hvdscale (one graph for every batch shape), so it uses TensorFlow ops only.
"""

import numpy as np
import tensorflow as tf

EMBEDDINGS = {"embed": "src"}  # variable name -> the batch field whose ids index its rows


class TFGRULM(tf.Module):
    def __init__(self, vocab: int, embed_dim: int, hidden: int, seed: int) -> None:
        super().__init__(name="gru_lm")
        rng = np.random.default_rng(seed)

        def var(name, shape, scale):
            return tf.Variable(rng.uniform(-scale, scale, shape).astype(np.float32), name=name)

        k = 1.0 / np.sqrt(hidden)
        self.embed = var("embed", (vocab, embed_dim), 0.1)
        self.w_x = var("w_x", (embed_dim, 3 * hidden), k)
        self.w_h = var("w_h", (hidden, 3 * hidden), k)
        self.b = var("b", (3 * hidden,), k)
        self.proj_w = var("proj_w", (hidden, vocab), k)
        self.proj_b = var("proj_b", (vocab,), k)
        self.hidden = hidden

    def __call__(self, src, src_len, tgt_in, tgt_out, tgt_len):
        x = tf.transpose(tf.gather(self.embed, src), [1, 0, 2])        # [T, B, E]
        xw = tf.tensordot(x, self.w_x, axes=1) + self.b                 # [T, B, 3H]
        live = tf.range(tf.shape(src)[1])[:, None] < src_len[None, :]  # [T, B]: a real token

        def step(h, inputs):
            xt, alive = inputs
            xr, xz, xn = tf.split(xt, 3, axis=1)
            hr, hz, hn = tf.split(tf.matmul(h, self.w_h), 3, axis=1)
            r, z = tf.sigmoid(xr + hr), tf.sigmoid(xz + hz)
            h_new = (1 - z) * tf.tanh(xn + r * hn) + z * h
            return tf.where(alive[:, None], h_new, h)    # padding leaves the state alone

        h0 = tf.zeros([tf.shape(src)[0], self.hidden])
        out = tf.transpose(tf.scan(step, (xw, live), initializer=h0), [1, 0, 2])  # [B, T, H]
        logits = tf.tensordot(out, self.proj_w, axes=1) + self.proj_b
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tgt_out, logits=logits)
        loss = tf.reduce_sum(tf.where(tgt_out != 0, ce, tf.zeros_like(ce)))
        return loss, tf.reduce_sum(tgt_len)


def build(sizes, rnn_impl, seed):
    return TFGRULM(sizes.src_vocab, sizes.embed_dim, sizes.hidden_size, seed)
