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
    use_device,
)

__all__ = ["FRAMEWORK", "ShardOptimizer", "TorchAdapter", "gpu_count", "gpu_provenance",
           "make_adapter", "make_optimizer", "set_threads", "use_device"]
