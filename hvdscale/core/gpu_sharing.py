"""Ranks that share one GPU, and which collectives can still serve them.

More ranks on a host than GPUs is allowed (``core.device``), but not every collective library
takes it: NCCL refuses two ranks of one communicator on the same GPU ("Duplicate GPU
detected"), and Horovod built with NCCL then raises instead of falling back (horovod issue
3929). gloo reduces CUDA tensors itself, and a Horovod built without GPU operations copies them
through host memory. The choice is made here, from every rank's placement, identically on every
rank and before any training, so a combination that cannot work is one clear error rather than
a failure inside the first allreduce.
"""

from __future__ import annotations

import socket
from collections import defaultdict
from typing import Any

from hvdscale.core.device import Placement
from hvdscale.errors import ConfigError

GpuKey = tuple[str, int] | None
"""(host, GPU ordinal) of one rank, or None for a rank on the CPU."""


def gpu_key(host: str, placement: Placement) -> GpuKey:
    """This rank's GPU as the other ranks can compare it (None on the CPU)."""
    return (host, int(placement.index or 0)) if placement.kind == "cuda" else None


def shared_groups(keys: list[GpuKey]) -> list[list[int]]:
    """The ranks of each GPU that more than one rank uses, in rank order (empty: none shared).

    ``keys[r]`` is rank r's ``gpu_key``.
    """
    by_gpu: dict[tuple[str, int], list[int]] = defaultdict(list)
    for rank, key in enumerate(keys):
        if key is not None:
            by_gpu[key].append(rank)
    return sorted((ranks for ranks in by_gpu.values() if len(ranks) > 1), key=lambda g: g[0])


def gather_groups(world: Any, placement: Placement) -> list[list[int]]:
    """``shared_groups`` over every rank's placement (a collective: every rank calls it)."""
    return shared_groups(world.allgather(gpu_key(socket.gethostname(), placement)))


def describe(groups: list[list[int]]) -> str:
    """'ranks 0 and 1 share one GPU' for the first shared GPU (and how many more there are)."""
    first = groups[0]
    names = ", ".join(map(str, first[:-1])) + f" and {first[-1]}"
    more = f" (and {len(groups) - 1} more shared GPU(s))" if len(groups) > 1 else ""
    return f"ranks {names} share one GPU{more}"


def check_horovod(groups: list[list[int]], nccl_built: bool) -> str:
    """The path Horovod's allreduce takes on GPUs, or a refusal where NCCL would meet a shared GPU.

    Raises:
        ConfigError: a GPU is shared and this Horovod reduces GPU tensors with NCCL.
    """
    if not groups:
        return "nccl" if nccl_built else "host copy"
    if nccl_built:
        raise ConfigError(
            f"strategy.name=horovod on GPUs: {describe(groups)}, and this Horovod was built "
            "with NCCL (HOROVOD_GPU_OPERATIONS=NCCL), which refuses two ranks on one GPU "
            "('Duplicate GPU detected'); run one rank per GPU (fewer ranks per host, or "
            "--gpus-per-task=1), or use strategy.name=ddp (gloo on shared GPUs) or ps, or a "
            "Horovod built without HOROVOD_GPU_OPERATIONS")
    return "host copy"


def ddp_backend(device_kind: str, groups: list[list[int]]) -> tuple[str, str]:
    """DDP's process-group backend and why: NCCL on GPUs of their own, gloo otherwise."""
    if device_kind != "cuda":
        return "gloo", "cpu"
    if groups:
        return "gloo", f"{describe(groups)}: NCCL refuses that, gloo reduces CUDA tensors"
    return "nccl", "one GPU per rank"

