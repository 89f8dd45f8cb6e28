"""What this process's TensorFlow runtime is set to before a run, and what it runs on: its thread
pools, the rank's GPU, TF32, and that GPU's provenance (the ``hvdscale.frameworks.base.Framework``
hooks of those names)."""

from __future__ import annotations

from typing import Any

from hvdscale.core.device import Placement
from hvdscale.frameworks.tf.quiet import tf


def gpu_count() -> int:
    """GPUs TensorFlow sees (0 with tensorflow-cpu); does not start the runtime."""
    return len(tf.config.list_physical_devices("GPU"))


def use_device(placement: Placement) -> None:
    """Show TensorFlow only this rank's GPU (or none on CPU), before its runtime starts.

    Memory grows on demand, so ranks sharing one GPU each get room."""
    gpus = tf.config.list_physical_devices("GPU")
    if placement.kind == "cuda":
        gpu = gpus[placement.index]
        tf.config.set_visible_devices([gpu], "GPU")
        tf.config.experimental.set_memory_growth(gpu, True)
    elif gpus:
        tf.config.set_visible_devices([], "GPU")


def set_tf32(mode: str) -> None:
    """TF32 on GPUs: ``on``, ``off``, or ``default`` (TensorFlow's own: on)."""
    if mode != "default":
        tf.config.experimental.enable_tensor_float_32_execution(mode == "on")


def gpu_provenance(placement: Placement) -> dict[str, Any] | None:
    """GPU model, count, driver (None: TensorFlow does not say), CUDA, cuDNN versions."""
    if placement.kind != "cuda":
        return None
    info = tf.sysconfig.get_build_info()
    gpus = tf.config.list_physical_devices("GPU")
    details = tf.config.experimental.get_device_details(gpus[0]) if gpus else {}
    return {"model": details.get("device_name"), "count": placement.visible_gpus,
            "driver": None, "cuda": info.get("cuda_version"),
            "cudnn": info.get("cudnn_version"), "nccl": None,
            "tf32": tf.config.experimental.tensor_float_32_execution_enabled()}


def set_threads(intra: int, inter: int) -> None:
    """Size TensorFlow's thread pools; must run before TensorFlow executes its first op."""
    try:
        tf.config.threading.set_intra_op_parallelism_threads(intra)
        tf.config.threading.set_inter_op_parallelism_threads(inter)
    except RuntimeError:
        pass  # runtime already started (a second run in one process): the first values stay
