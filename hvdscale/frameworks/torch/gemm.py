"""The PyTorch back end of ``hvdscale gemm``: operands built once, one product per call.

The study (``hvdscale.study.gemm``) sets the thread environment before importing this
module (importing the package imports torch), then asks ``backend`` for a preparer.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

Prepare = Callable[[tuple[int, int], tuple[int, int], bool, bool], Callable[[], object]]


def backend(threads: int) -> Prepare:
    """``prepare(a_shape, b_shape, ta, tb)``: random operands of those shapes (seeded), and a
    callable that runs ``op(a) . op(b)`` once (``op`` transposes where the flag is set)."""
    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)

    def prepare(a_shape: tuple[int, int], b_shape: tuple[int, int], ta: bool,
                tb: bool) -> Callable[[], object]:
        a = torch.randn(*a_shape, generator=gen)
        b = torch.randn(*b_shape, generator=gen)
        # .t() is a strided view: torch hands BLAS a transpose flag, no copy is made.
        a_ = a.t() if ta else a
        b_ = b.t() if tb else b
        out = torch.empty(a_.shape[0], b_.shape[1])
        return lambda: torch.mm(a_, b_, out=out)

    return prepare
