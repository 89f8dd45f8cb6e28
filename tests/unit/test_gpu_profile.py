"""GPU kernel counts from profiler events (issue 31): crafted events, since no GPU runs here."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")


def _ev(name: str, device: object, us: float = 10.0) -> SimpleNamespace:
    return SimpleNamespace(name=name, device_type=device,
                           time_range=SimpleNamespace(elapsed_us=lambda: us))


def test_gpu_kernels_counted_per_step_without_copies_or_cpu_events() -> None:
    from hvdscale.frameworks.torch.profile import gpu_kernel_counts

    cuda, cpu = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU
    events = [_ev("void cudnn::rnn::lstm_elementwise_fp", cuda), _ev("ampere_sgemm_128x64", cuda),
              _ev("Memcpy HtoD (Pinned -> Device)", cuda), _ev("aten::mm", cpu),
              _ev("ampere_sgemm_128x64", cuda), _ev("RNN_blockPersist_fp_LSTM", cuda)]
    out = gpu_kernel_counts(events, steps=2)
    assert out["gpu_kernels"] == 2.0  # 4 kernels over 2 steps: the copy and the CPU op are not
    assert out["gpu_rnn_kernels"] == 1.0
    assert out["top_gpu_kernels"][0] == ("ampere_sgemm_128x64", 2)
