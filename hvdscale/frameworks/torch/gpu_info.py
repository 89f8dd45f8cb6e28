"""What a rank's GPU is, as torch reports it (for the record's ``device.gpu``)."""

from __future__ import annotations

import subprocess
from typing import Any

import torch

from hvdscale.core.device import Placement


def _driver_version() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 else None
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return None


def gpu_provenance(placement: Placement) -> dict[str, Any] | None:
    """GPU model, count, driver, CUDA, cuDNN and NCCL versions as torch reports them."""
    if placement.kind != "cuda":
        return None
    nccl = None
    try:
        v = torch.cuda.nccl.version()
        nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:  # torch built without NCCL: the record says None
        pass
    return {"model": torch.cuda.get_device_name(placement.index),
            "count": torch.cuda.device_count(), "driver": _driver_version(),
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "nccl": nccl, "tf32": {"matmul": torch.backends.cuda.matmul.allow_tf32,
                                   "cudnn": torch.backends.cudnn.allow_tf32}}
