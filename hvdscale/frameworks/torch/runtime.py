"""What this process's torch runtime is set to before a run: its thread pools, the rank's GPU
and TF32 (the ``hvdscale.frameworks.base.Framework`` hooks of that name)."""

from __future__ import annotations

import torch

from hvdscale.core.device import Placement


def set_threads(intra: int, inter: int) -> None:
    """Pin torch's thread pools; inter-op can be set only once per process."""
    torch.set_num_threads(intra)
    try:
        torch.set_num_interop_threads(inter)
    except RuntimeError:
        pass  # already set (a second run in one process): the first value stays in force


def gpu_count() -> int:
    """GPUs torch sees (0 without CUDA); creates no CUDA context."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def use_device(placement: Placement) -> None:
    """Make the rank's GPU torch's current device (nothing on CPU)."""
    if placement.kind == "cuda":
        torch.cuda.set_device(placement.index)


def set_tf32(mode: str) -> None:
    """TF32 for cuBLAS matmuls and cuDNN (the fused LSTM) alike: ``on``, ``off``, or
    ``default`` (torch's own: matmuls off, cuDNN on)."""
    if mode != "default":
        torch.backends.cuda.matmul.allow_tf32 = mode == "on"
        torch.backends.cudnn.allow_tf32 = mode == "on"
