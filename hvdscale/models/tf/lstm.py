"""Multi-layer LSTM for TensorFlow in two implementations with PyTorch's parameter layout.

Each layer and direction holds ``weight_ih`` [4H, I], ``weight_hh`` [4H, H], ``bias_ih`` [4H]
and ``bias_hh`` [4H] with the gates in PyTorch's i, f, g, o order, registered in
``nn.LSTM``'s order (``weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, ..._reverse``).

``fused`` runs one op per layer and direction over the whole sequence: ``BlockLSTMV2`` on CPU
(the seed notes' cudnn_lstm counterpart here) and ``CudnnRNNV3`` on an NVIDIA GPU. ``loop``
runs an explicit ``tf.while_loop`` over the cell math (the seed notes' dynamic_rnn). Both
freeze a sequence's state past its length, so the final state is its last real one, and zero
its outputs there: padding never changes the result.

Tensors are time-major inside the stack ([T, B, ...]), which is what the fused kernels take.
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from hvdscale.models.tf.params import OrderedModule, uniform

State = tuple[tf.Tensor, tf.Tensor]
Cell = tuple[tf.Variable, tf.Variable, tf.Variable, tf.Variable]

IMPLS = ("fused", "loop")


def cudnn_available() -> bool:
    """Whether TensorFlow sees an NVIDIA GPU (the fused path then uses the cuDNN kernel).

    ROCm builds are left on ``BlockLSTMV2``: MIOpen orders the gates differently.
    """
    if tf.sysconfig.get_build_info().get("is_rocm_build", False):
        return False
    return bool(tf.config.list_logical_devices("GPU"))


def _block_lstm(seq_len_max: tf.Tensor, x: tf.Tensor, c0: tf.Tensor, h0: tf.Tensor,
                w: tf.Tensor, b: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """``BlockLSTMV2`` over ``x`` [T, B, I]; returns all cell states and outputs, [T, B, H].

    ``w`` is [I + H, 4H] acting on ``concat(x_t, h_{t-1})`` and ``b`` is [4H], gate columns in
    the op's IFCO order (input, forget, cell candidate, output), which is PyTorch's i, f, g, o.
    V2 has no forget bias; a negative ``cell_clip`` turns clipping off; no peepholes.

    The gradient is spelled out here because tensorflow 2.21 registers the V1 gradient kernel
    (``BlockLSTMGrad``, ICFO gate layout) for ``BlockLSTMV2``, which gives wrong weight and input
    gradients for the IFCO op (measured: the forward matched a reference cell, the registered
    gradient did not); ``BlockLSTMGradV2`` is the kernel with V2's layout.
    """
    hidden = tf.shape(h0)[1:]
    zeros = tf.zeros(hidden, dtype=x.dtype)  # peephole weights, unused

    @tf.custom_gradient
    def run(x: tf.Tensor, c0: tf.Tensor, h0: tf.Tensor, w: tf.Tensor,
            b: tf.Tensor) -> tuple[tuple[tf.Tensor, tf.Tensor], object]:
        i, cs, f, o, ci, co, h = tf.raw_ops.BlockLSTMV2(
            seq_len_max=seq_len_max, x=x, cs_prev=c0, h_prev=h0, w=w, wci=zeros, wcf=zeros,
            wco=zeros, b=b, cell_clip=-1.0, use_peephole=False)

        def grad(d_cs: tf.Tensor | None, d_h: tf.Tensor | None) -> list[tf.Tensor]:
            d_cs = tf.zeros_like(cs) if d_cs is None else d_cs
            d_h = tf.zeros_like(h) if d_h is None else d_h
            dx, dc0, dh0, dw, _, _, _, db = tf.raw_ops.BlockLSTMGradV2(
                seq_len_max=seq_len_max, x=x, cs_prev=c0, h_prev=h0, w=w, wci=zeros,
                wcf=zeros, wco=zeros, b=b, i=i, cs=cs, f=f, o=o, ci=ci, co=co, h=h,
                cs_grad=d_cs, h_grad=d_h, use_peephole=False)
            return [dx, dc0, dh0, dw, db]

        return (cs, h), grad

    return run(x, c0, h0, w, b)


def _last_step(seq: tf.Tensor, first: tf.Tensor, lengths: tf.Tensor) -> tf.Tensor:
    """Each sequence's value at its last real step: ``seq`` [T, B, H] at ``lengths - 1``.

    ``first`` (the initial state) stands at index -1, so a zero length gives it back.
    """
    padded = tf.concat([first[tf.newaxis], seq], axis=0)
    idx = tf.stack([lengths, tf.range(tf.shape(lengths)[0])], axis=1)
    return tf.gather_nd(padded, idx)


def _fused_direction(x: tf.Tensor, lengths: tf.Tensor, mask: tf.Tensor, cell: Cell,
                     h0: tf.Tensor, c0: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """One direction with ``BlockLSTMV2`` over the padded batch; see ``LSTMStack``."""
    w_ih, w_hh, b_ih, b_hh = cell
    # PyTorch computes W_ih x + W_hh h; the op computes [x, h] @ w: stack the transposes.
    w = tf.concat([tf.transpose(w_ih), tf.transpose(w_hh)], axis=0)
    # The op runs only up to the longest real sequence (outputs past it are zero).
    seq_len_max = tf.cast(tf.reduce_max(tf.concat([lengths, [0]], 0)), tf.int64)
    cs, h = _block_lstm(seq_len_max, x, c0, h0, w, b_ih + b_hh)
    # Steps past a sequence's end ran on padding: their outputs are dropped and the final state
    # is read at the last real step, so padding reaches neither the result nor the gradients.
    return h * mask, _last_step(h, h0, lengths), _last_step(cs, c0, lengths)


def _loop_direction(x: tf.Tensor, lengths: tf.Tensor, mask: tf.Tensor, cell: Cell,
                    h0: tf.Tensor, c0: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """One direction with an explicit ``tf.while_loop`` over the cell; see ``LSTMStack``."""
    w_ih, w_hh, b_ih, b_hh = cell
    steps = tf.shape(x)[0]
    # The input projection has no time dependency: one GEMM over all steps (as the PyTorch
    # loop); only the recurrent GEMM stays in the loop.
    x_proj = tf.tensordot(x, w_ih, axes=[[2], [1]]) + (b_ih + b_hh)
    # Reading steps from a TensorArray keeps the backward pass O(T) (slicing a tensor inside
    # the loop would add a dense [T, B, 4H] gradient per step).
    inputs = tf.TensorArray(x.dtype, size=steps).unstack(x_proj)
    outputs = tf.TensorArray(x.dtype, size=steps)

    def body(t: tf.Tensor, h: tf.Tensor, c: tf.Tensor,
             outputs: tf.TensorArray) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.TensorArray]:
        gates = inputs.read(t) + tf.matmul(h, w_hh, transpose_b=True)
        i, f, g, o = tf.split(gates, 4, axis=1)
        c_new = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
        h_new = tf.sigmoid(o) * tf.tanh(c_new)
        # Past a sequence's end its state is frozen, so the final state is its last real one.
        live = tf.expand_dims(t < lengths, 1)
        outputs = outputs.write(t, tf.where(live, h_new, tf.zeros_like(h_new)))
        return t + 1, tf.where(live, h_new, h), tf.where(live, c_new, c), outputs

    _, h, c, outputs = tf.while_loop(lambda t, *_: t < steps, body,
                                     (tf.constant(0), h0, c0, outputs))
    out = outputs.stack()
    out.set_shape(x.shape[:2].concatenate(h0.shape[1:]))
    return out, h, c


def _cudnn_direction(x: tf.Tensor, lengths: tf.Tensor, mask: tf.Tensor, cell: Cell,
                     h0: tf.Tensor, c0: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """One direction with ``CudnnRNNV3`` (GPU only); see ``LSTMStack``.

    NOT RUN HERE: this machine has no GPU, so this path is written to the op's contract and only
    the CPU paths are tested. cuDNN's LSTM gates are i, f, g(c), o, as PyTorch's, and the packed
    weights of one unidirectional layer are its 4 input matrices ([H, I] each, row-major), its 4
    recurrent ones, then the 4 input and 4 recurrent biases (the layout Keras's own cuDNN LSTM
    builds): exactly the flattened ``weight_ih, weight_hh, bias_ih, bias_hh``. The concat is
    differentiable, so gradients come back to the PyTorch-layout variables. One call per layer
    and direction (not one for the whole stack) keeps to that one-layer layout.
    """
    params = tf.concat([tf.reshape(v, [-1]) for v in cell], axis=0)
    out, h, c, _, _ = tf.raw_ops.CudnnRNNV3(
        input=x, input_h=h0[tf.newaxis], input_c=c0[tf.newaxis], params=params,
        sequence_lengths=lengths, rnn_mode="lstm", input_mode="linear_input",
        direction="unidirectional", dropout=0.0, is_training=True, time_major=True)
    # With sequence_lengths, h and c are each sequence's state at its last real step.
    return out * mask, h[0], c[0]


class LSTMStack(OrderedModule):
    """Multi-layer (optionally bidirectional) LSTM with ``nn.LSTM``'s parameters.

    Args:
        impl: ``fused`` or ``loop``.
        input_size, hidden_size, num_layers, bidirectional: as ``nn.LSTM``'s.
        rng: draws the initial values, U(-1/sqrt(H), 1/sqrt(H)) for every parameter.
    """

    def __init__(self, impl: str, input_size: int, hidden_size: int, num_layers: int,
                 bidirectional: bool, rng: np.random.Generator, name: str = "lstm") -> None:
        if impl not in IMPLS:
            raise ValueError(f"unknown rnn implementation {impl!r}")
        super().__init__(name=name)
        self.impl = impl
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.num_directions = 2 if bidirectional else 1
        bound = 1.0 / math.sqrt(hidden_size)
        h4 = 4 * hidden_size
        self.cells: list[Cell] = []
        for layer in range(num_layers):
            in_size = input_size if layer == 0 else hidden_size * self.num_directions
            for suffix in ("", "_reverse")[: self.num_directions]:
                self.cells.append((
                    self.add_param(f"weight_ih_l{layer}{suffix}",
                                   uniform(rng, (h4, in_size), bound)),
                    self.add_param(f"weight_hh_l{layer}{suffix}",
                                   uniform(rng, (h4, hidden_size), bound)),
                    self.add_param(f"bias_ih_l{layer}{suffix}", uniform(rng, (h4,), bound)),
                    self.add_param(f"bias_hh_l{layer}{suffix}", uniform(rng, (h4,), bound)),
                ))
        # Decided once, when the model is built: a GPU at build time means the cuDNN kernel.
        self.use_cudnn = impl == "fused" and cudnn_available()

    @tf.Module.with_name_scope  # ops named encoder/..., decoder/... (profiles attribute them)
    def __call__(self, x: tf.Tensor, lengths: tf.Tensor,
                 state: State | None = None) -> tuple[tf.Tensor, State]:
        """Run the stack over ``x`` [T, B, I] (time-major) with int32 ``lengths`` [B].

        Returns outputs [T, B, D*H] (zero past each length) and (h, c), each [L*D, B, H] in
        ``nn.LSTM``'s order (layer-major, forward before reverse), taken at each sequence's
        last real step.
        """
        batch = tf.shape(x)[1]
        n = self.num_layers * self.num_directions
        if state is None:
            zeros = tf.zeros([n, batch, self.hidden_size], dtype=x.dtype)
            state = (zeros, zeros)
        h0, c0 = state
        steps = tf.shape(x)[0]
        mask = tf.cast(tf.range(steps)[:, tf.newaxis] < lengths[tf.newaxis, :], x.dtype)
        mask = mask[:, :, tf.newaxis]
        direction = {"fused": _cudnn_direction if self.use_cudnn else _fused_direction,
                     "loop": _loop_direction}[self.impl]
        h_n, c_n = [], []
        inp = x
        for layer in range(self.num_layers):
            outs = []
            for d in range(self.num_directions):
                k = layer * self.num_directions + d
                # The reverse direction reads each sequence backwards within its own length;
                # padding stays at the end, where the forward code already handles it.
                seq = inp if d == 0 else tf.reverse_sequence(inp, lengths, seq_axis=0,
                                                             batch_axis=1)
                out, h, c = direction(seq, lengths, mask, self.cells[k], h0[k], c0[k])
                if d == 1:
                    out = tf.reverse_sequence(out, lengths, seq_axis=0, batch_axis=1)
                outs.append(out)
                h_n.append(h)
                c_n.append(c)
            inp = tf.concat(outs, axis=2) if len(outs) > 1 else outs[0]
        return inp, (tf.stack(h_n), tf.stack(c_n))
