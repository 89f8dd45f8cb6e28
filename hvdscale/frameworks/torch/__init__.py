"""PyTorch: the adapter, Horovod's PyTorch integration, DDP (PyTorch's own data parallelism),
the GEMM backend and the profiler.

The framework hooks (``hvdscale.frameworks.base.Framework``) are this package's names; importing
it imports torch, never tensorflow.
"""

from hvdscale.frameworks.torch.adapter import FRAMEWORK, TorchAdapter, make_adapter, tensor_sizes
from hvdscale.frameworks.torch.ddp import DDPStrategy, make_native_strategy
from hvdscale.frameworks.torch.gpu_info import gpu_provenance
from hvdscale.frameworks.torch.horovod import HOROVOD, HorovodTorch
from hvdscale.frameworks.torch.horovod import HorovodTorch as HorovodStrategy
from hvdscale.frameworks.torch.optimizer import ShardOptimizer, make_optimizer
from hvdscale.frameworks.torch.preload import preload
from hvdscale.frameworks.torch.runtime import gpu_count, set_tf32, set_threads, use_device

__all__ = [
    "FRAMEWORK",
    "HOROVOD",
    "DDPStrategy",
    "HorovodStrategy",
    "HorovodTorch",
    "ShardOptimizer",
    "TorchAdapter",
    "gpu_count",
    "gpu_provenance",
    "make_adapter",
    "make_native_strategy",
    "make_optimizer",
    "preload",
    "set_tf32",
    "set_threads",
    "tensor_sizes",
    "use_device",
]
