"""PyTorch: the adapter, Horovod's PyTorch integration, the GEMM backend and the profiler.

The framework hooks (``hvdscale.frameworks.base.Framework``) are this package's names; importing
it imports torch, never tensorflow.
"""

from hvdscale.frameworks.torch.adapter import (
    FRAMEWORK,
    ShardOptimizer,
    TorchAdapter,
    gpu_count,
    gpu_provenance,
    make_adapter,
    make_optimizer,
    set_threads,
    tensor_sizes,
    use_device,
)
from hvdscale.frameworks.torch.horovod import HOROVOD, HorovodTorch
from hvdscale.frameworks.torch.horovod import HorovodTorch as HorovodStrategy

__all__ = [
    "FRAMEWORK",
    "HOROVOD",
    "HorovodStrategy",
    "HorovodTorch",
    "ShardOptimizer",
    "TorchAdapter",
    "gpu_count",
    "gpu_provenance",
    "make_adapter",
    "make_optimizer",
    "set_threads",
    "tensor_sizes",
    "use_device",
]
