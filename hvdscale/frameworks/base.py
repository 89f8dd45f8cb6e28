"""What a framework package provides (``Framework``): the hooks the runner and the study tools
call by name on ``hvdscale.frameworks.<name>``. The adapter protocol those hooks return is
``hvdscale.strategies.base.Adapter``; the Horovod collectives protocol is
``hvdscale.core.world.HorovodCollectives``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from hvdscale.config import HorovodConfig, StrategyConfig
from hvdscale.core.device import Placement
from hvdscale.core.world import HorovodCollectives
from hvdscale.strategies.base import Adapter, Strategy


class Framework(Protocol):
    """What a framework module (``hvdscale.frameworks.torch`` / ``.tf``) provides.

    ``tests/unit/test_frameworks.py`` reads these members and checks every registered framework
    has each, so a hook added here is checked everywhere. Two hooks are optional, read with
    ``getattr``: ``preload()``, first-use work done once at a launch's start-up (torch's first
    optimizer step), and ``release()``, the state a point's model leaves in the process, dropped
    before the next point of a shared launch (Keras's session)."""

    FRAMEWORK: str
    """The framework's name in ``hvdscale.registry.FRAMEWORKS`` (and in configs and records)."""

    HOROVOD: HorovodCollectives
    """The framework's Horovod integration as the harness's world uses it: the module
    ``init_horovod`` starts (e.g. ``horovod.torch``), a barrier, and a sum over the ranks."""

    HorovodStrategy: Callable[[HorovodConfig], Strategy]
    """The Horovod strategy class, built on the framework's own Horovod integration;
    ``hvdscale.strategies.make_strategy`` builds it for ``strategy.name=horovod``."""

    def make_native_strategy(self, cfg: StrategyConfig, world: object) -> Strategy:
        """The framework's own data-parallel strategy (its name: ``hvdscale.registry.native_for``,
        ``ddp`` for PyTorch, ``mwms`` for TensorFlow) for ``cfg`` on the harness's ``world``;
        ``hvdscale.strategies.make_strategy`` builds it by name."""
        ...

    def set_threads(self, intra: int, inter: int) -> None:
        """Size the framework's intra-op and inter-op thread pools, before its first op."""
        ...

    def gpu_count(self) -> int:
        """GPUs this process sees, without creating a device context."""
        ...

    def use_device(self, placement: Placement) -> None:
        """Make ``placement`` this process's device before the framework's runtime starts."""
        ...

    def set_tf32(self, mode: str) -> None:
        """TF32 on GPUs (``RunConfig.tf32``: default, on, off); nothing changes on CPUs."""
        ...

    def gpu_provenance(self, placement: Placement) -> dict[str, Any] | None:
        """GPU model, count, driver, CUDA, cuDNN and NCCL versions (None on CPU)."""
        ...

    def make_adapter(self, model_cfg: object, optim_cfg: object, src_vocab: int,
                     tgt_vocab: int, placement: Placement = ...,
                     precision: str = ...) -> Adapter:
        """The run's model and optimizer (``model_cfg``, ``optim_cfg``) for these vocabulary
        sizes, placed on ``placement`` (the CPU when not given), computing in ``precision``
        (``RunConfig.precision``, fp32 when not given), behind the adapter protocol."""
        ...

    def tensor_sizes(self, model_cfg: object, src_vocab: int,
                     tgt_vocab: int) -> list[tuple[str, int]]:
        """(dotted name, element count) of each trainable parameter tensor of the model
        ``model_cfg`` describes at these vocabulary sizes, in flat-buffer order (the order
        gradients are laid out and reduced in): the layout alone, for the study tools
        (``predict``'s gradient bytes), without making an adapter or an optimizer."""
        ...
