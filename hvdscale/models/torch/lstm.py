"""Multi-layer LSTM in two implementations with one parameter layout.

``fused`` runs PyTorch's library kernel (``nn.LSTM`` over packed sequences; cuDNN on GPUs, the
seed notes' cudnn_lstm). ``loop`` runs an explicit per-time-step cell in Python (the seed notes'
dynamic_rnn); ``compiled`` is that loop with its cell compiled by ``torch.compile`` (one fused
kernel per step for the cell's pointwise work; CUDA graphs on a GPU). All hold the same
parameters under the same names (``weight_ih_l0``, ``weight_hh_l0_reverse``, ...; gates in i, f,
g, o order), so a state dict moves between them and they give the same outputs and gradients for
the same weights (the compiled cell to rounding: its fused kernel may round differently).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

State = tuple[torch.Tensor, torch.Tensor]


def reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each sequence of ``x`` [B, T, ...] within its own length; padding stays put."""
    b, t = x.shape[:2]
    steps = torch.arange(t, device=x.device).unsqueeze(0).expand(b, t)
    rev = lengths.unsqueeze(1) - 1 - steps
    idx = torch.where(rev >= 0, rev, steps)
    idx = idx.view(b, t, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, idx)


def lstm_cell(x_t: torch.Tensor, h: torch.Tensor, c: torch.Tensor, w_hh: torch.Tensor,
              live: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One time step: new (h, c) and the step's output; rows past their sequence's end keep
    their state (so the final state is the last real one) and output zeros."""
    gates = x_t + torch.matmul(h, w_hh.t())
    i, f, g, o = gates.chunk(4, dim=1)
    c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    h_new = torch.sigmoid(o) * torch.tanh(c_new)
    return (torch.where(live, h_new, h), torch.where(live, c_new, c),
            torch.where(live, h_new, torch.zeros_like(h_new)))


_COMPILED: dict[str, object] = {}


def compiled_cell(device_type: str) -> object:
    """``lstm_cell`` compiled once per process and device type (compilation itself is lazy: the
    first call of each shape pays it). On a GPU, reduce-overhead mode captures CUDA graphs, the
    point on a GPU being the ~10 kernel launches per step; the CPU has no graphs to capture."""
    if device_type not in _COMPILED:
        # Each layer width, grad mode and autocast dtype is one more graph (a 4+4-layer model in
        # bf16 and fp32 needs more than dynamo's default 8 before it falls back to eager).
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
        mode = "reduce-overhead" if device_type == "cuda" else "default"
        _COMPILED[device_type] = torch.compile(lstm_cell, mode=mode)
    return _COMPILED[device_type]


class LoopLSTM(nn.Module):
    """LSTM stepping through time in Python; parameters laid out as ``nn.LSTM``'s."""

    compiled = False
    """Whether the cell runs compiled (``CompiledLoopLSTM``)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int,
                 bidirectional: bool) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.num_directions = 2 if bidirectional else 1
        for layer in range(num_layers):
            in_size = input_size if layer == 0 else hidden_size * self.num_directions
            for suffix in ("", "_reverse")[: self.num_directions]:
                self.register_parameter(f"weight_ih_l{layer}{suffix}",
                                        nn.Parameter(torch.empty(4 * hidden_size, in_size)))
                self.register_parameter(f"weight_hh_l{layer}{suffix}",
                                        nn.Parameter(torch.empty(4 * hidden_size, hidden_size)))
                self.register_parameter(f"bias_ih_l{layer}{suffix}",
                                        nn.Parameter(torch.empty(4 * hidden_size)))
                self.register_parameter(f"bias_hh_l{layer}{suffix}",
                                        nn.Parameter(torch.empty(4 * hidden_size)))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # The same init as nn.LSTM: U(-1/sqrt(H), 1/sqrt(H)) for every parameter.
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def _direction(self, x: torch.Tensor, lengths: torch.Tensor, layer: int, suffix: str,
                   h: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, State]:
        w_ih = getattr(self, f"weight_ih_l{layer}{suffix}")
        w_hh = getattr(self, f"weight_hh_l{layer}{suffix}")
        b = getattr(self, f"bias_ih_l{layer}{suffix}") + getattr(self, f"bias_hh_l{layer}{suffix}")
        # The input projection has no time dependency: one GEMM over all steps (the seed notes'
        # "combine GEMMs without data dependencies"); only the recurrent GEMM stays in the loop.
        # Time-major and contiguous, so each step's slice has the same strides whatever the
        # sentence length (a compiled cell would otherwise recompile for every length).
        x_proj = (torch.matmul(x, w_ih.t()) + b).transpose(0, 1).contiguous()
        cell = compiled_cell(x.device.type) if self.compiled else lstm_cell
        outputs = []
        for t in range(x.shape[1]):
            h, c, out = cell(x_proj[t], h, c, w_hh, (t < lengths).unsqueeze(1))
            outputs.append(out)
        return torch.stack(outputs, dim=1), (h, c)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor,
                state: State | None = None) -> tuple[torch.Tensor, State]:
        """Run the stack over ``x`` [B, T, I]; returns outputs [B, T, D*H] and (h, c)."""
        bsz = x.shape[0]
        n = self.num_layers * self.num_directions
        if state is None:
            zeros = x.new_zeros(n, bsz, self.hidden_size)
            state = (zeros, zeros)
        h0, c0 = state
        h_n, c_n = [], []
        inp = x
        for layer in range(self.num_layers):
            outs = []
            for d, suffix in enumerate(("", "_reverse")[: self.num_directions]):
                k = layer * self.num_directions + d
                seq = inp if d == 0 else reverse_padded(inp, lengths)
                out, (h, c) = self._direction(seq, lengths, layer, suffix, h0[k], c0[k])
                outs.append(out if d == 0 else reverse_padded(out, lengths))
                h_n.append(h)
                c_n.append(c)
            inp = torch.cat(outs, dim=2) if len(outs) > 1 else outs[0]
        return inp, (torch.stack(h_n), torch.stack(c_n))


class CompiledLoopLSTM(LoopLSTM):
    """``LoopLSTM`` whose cell runs through ``torch.compile`` (same parameters and names)."""

    compiled = True


class FusedLSTM(nn.LSTM):
    """``nn.LSTM`` over packed sequences, so padding never enters the recurrence.

    A subclass rather than a wrapper, so parameter names match ``LoopLSTM``'s exactly.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int,
                 bidirectional: bool) -> None:
        super().__init__(input_size, hidden_size, num_layers, batch_first=True,
                         bidirectional=bidirectional)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor,  # type: ignore[override]
                state: State | None = None) -> tuple[torch.Tensor, State]:
        """Same contract as ``LoopLSTM.forward``."""
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, (h, c) = super().forward(packed, state)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        return out, (h, c)


def make_lstm(impl: str, input_size: int, hidden_size: int, num_layers: int,
              bidirectional: bool) -> nn.Module:
    """An LSTM stack of the given implementation (``fused``, ``loop`` or ``compiled``)."""
    if impl == "fused":
        return FusedLSTM(input_size, hidden_size, num_layers, bidirectional)
    if impl == "loop":
        return LoopLSTM(input_size, hidden_size, num_layers, bidirectional)
    if impl == "compiled":
        return CompiledLoopLSTM(input_size, hidden_size, num_layers, bidirectional)
    raise ValueError(f"unknown rnn implementation {impl!r}")
