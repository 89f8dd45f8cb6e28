"""The PyTorch back end of ``hvdscale gemm``: operands built once, one product per call.

The study (``hvdscale.study.stepcost.gemm``) sets the thread environment before importing this
module (importing the package imports torch), then asks ``backend`` for a preparer, and
``synchronizer`` for what ends a timed interval on the device (a GPU runs its kernels
asynchronously: the clock may only stop once the queued products are done).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from hvdscale.errors import HvdscaleError

Prepare = Callable[[tuple[int, int], tuple[int, int], bool, bool], Callable[[], object]]
PRECISIONS = ("fp32", "tf32", "bf16")


def _device(device: str, precision: str) -> torch.device:
    """The device to time on, with TF32 set as ``precision`` asks (GPUs only)."""
    if precision not in PRECISIONS:
        raise HvdscaleError(f"--precision must be among {', '.join(PRECISIONS)} "
                            f"(got {precision!r})")
    dev = torch.device(device)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise HvdscaleError("--device cuda: torch sees no GPU (torch.cuda.is_available() "
                                "is False); use --device cpu or run on a GPU machine")
        # fp32 rows must be true fp32: TF32 only where asked (cuBLAS otherwise may use it).
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    elif precision == "tf32":
        raise HvdscaleError("--precision tf32 is a GPU (tensor core) format: use --device cuda, "
                            "or fp32/bf16 on the CPU")
    return dev


def backend(threads: int, device: str = "cpu", precision: str = "fp32") -> Prepare:
    """``prepare(a_shape, b_shape, ta, tb)``: random operands of those shapes (seeded) on
    ``device`` in ``precision``, and a callable that runs ``op(a) . op(b)`` once (``op``
    transposes where the flag is set).

    Raises:
        HvdscaleError: an unknown precision, tf32 on the CPU, or cuda without a GPU.
    """
    torch.set_num_threads(threads)
    dev = _device(device, precision)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    gen = torch.Generator(device=dev).manual_seed(0)

    def prepare(a_shape: tuple[int, int], b_shape: tuple[int, int], ta: bool,
                tb: bool) -> Callable[[], object]:
        a = torch.randn(*a_shape, generator=gen, device=dev, dtype=dtype)
        b = torch.randn(*b_shape, generator=gen, device=dev, dtype=dtype)
        # .t() is a strided view: torch hands BLAS a transpose flag, no copy is made.
        a_ = a.t() if ta else a
        b_ = b.t() if tb else b
        out = torch.empty(a_.shape[0], b_.shape[1], device=dev, dtype=dtype)
        return lambda: torch.mm(a_, b_, out=out)

    return prepare


def synchronizer(device: str) -> Callable[[], None]:
    """What waits for the device's queued work: ``torch.cuda.synchronize`` on a GPU."""
    if torch.device(device).type == "cuda":
        return torch.cuda.synchronize
    return lambda: None
