"""TensorFlow: the adapter, Horovod's TensorFlow integration, the GEMM backend and the profiler.

The framework hooks (``hvdscale.frameworks.base.Framework``) are this package's names; importing
it imports tensorflow, never torch.
"""

from hvdscale.frameworks.tf.adapter import FRAMEWORK, TFAdapter, make_adapter, tensor_sizes
from hvdscale.frameworks.tf.horovod import HOROVOD, HorovodTF
from hvdscale.frameworks.tf.horovod import HorovodTF as HorovodStrategy
from hvdscale.frameworks.tf.mwms import make_native_strategy
from hvdscale.frameworks.tf.optimizer import TFOptimizer
from hvdscale.frameworks.tf.runtime import (
    gpu_count,
    gpu_provenance,
    set_tf32,
    set_threads,
    use_device,
)
from hvdscale.frameworks.tf.session import release

__all__ = [
    "FRAMEWORK",
    "HOROVOD",
    "HorovodStrategy",
    "HorovodTF",
    "TFAdapter",
    "TFOptimizer",
    "gpu_count",
    "gpu_provenance",
    "make_adapter",
    "make_native_strategy",
    "release",
    "set_tf32",
    "set_threads",
    "tensor_sizes",
    "use_device",
]
