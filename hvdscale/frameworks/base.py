"""What a framework package provides (``Framework``): the hooks the runner and the study tools
call by name on ``hvdscale.frameworks.<name>``. The adapter protocol those hooks return is
``hvdscale.strategies.base.Adapter``."""

from __future__ import annotations

from typing import Any, Protocol

from hvdscale.core.device import Placement
from hvdscale.strategies.base import Adapter


class Framework(Protocol):
    """What a framework module (``hvdscale.frameworks.torch`` / ``.tf``) provides."""

    FRAMEWORK: str

    def set_threads(self, intra: int, inter: int) -> None: ...

    def gpu_count(self) -> int:
        """GPUs this process sees, without creating a device context."""
        ...

    def use_device(self, placement: Placement) -> None:
        """Make ``placement`` this process's device before the framework's runtime starts."""
        ...

    def gpu_provenance(self, placement: Placement) -> dict[str, Any] | None:
        """GPU model, count, driver, CUDA, cuDNN and NCCL versions (None on CPU)."""
        ...

    def make_adapter(self, model_cfg: object, optim_cfg: object, src_vocab: int,
                     tgt_vocab: int, placement: Placement = ...) -> Adapter: ...
