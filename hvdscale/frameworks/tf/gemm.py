"""The TensorFlow back end of ``hvdscale gemm``: operands built once, one product per call.

The study (``hvdscale.study.stepcost.gemm``) sets the thread environment before importing this
module (importing the package imports tensorflow), then asks ``backend`` for a preparer.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from hvdscale.errors import HvdscaleError

Prepare = Callable[[tuple[int, int], tuple[int, int], bool, bool], Callable[[], object]]


def backend(threads: int) -> Prepare:
    """``prepare(a_shape, b_shape, ta, tb)``: random operands of those shapes (seeded), and a
    callable that runs ``op(a) . op(b)`` once (``op`` transposes where the flag is set).

    Raises:
        HvdscaleError: TensorFlow already started here with another thread count.
    """
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:  # TF already started in this process: only fine if it agrees
        if tf.config.threading.get_intra_op_parallelism_threads() != threads:
            raise HvdscaleError("TensorFlow was started with another thread count before "
                                "hvdscale gemm could set it") from None
    gen = tf.random.Generator.from_seed(0)

    def prepare(a_shape: tuple[int, int], b_shape: tuple[int, int], ta: bool,
                tb: bool) -> Callable[[], object]:
        a = gen.normal(a_shape)
        b = gen.normal(b_shape)
        # Eager on CPU runs synchronously: the call returns when the product is done.
        return lambda: tf.linalg.matmul(a, b, transpose_a=ta, transpose_b=tb)

    return prepare
