"""Which device each rank computes on: ``device: auto|cpu|cuda`` resolved per rank at start-up.

Resolved from the launcher's environment, before Horovod starts and before TensorFlow creates
its runtime (a TensorFlow process can restrict its visible GPUs only before that). Rank r uses
GPU ``local_rank % visible_gpus`` (Horovod's and SLURM's convention). More ranks on a host than
GPUs is allowed: the ranks share GPUs, a warning says so and the record keeps ``shared_by``,
because the issue's own check (np=2 on one GPU) and small test machines need it; a production
run sees ``shared_by > 1`` in its record and can tell its figures are not one GPU per rank.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass
from typing import Any

from hvdscale.errors import HvdscaleError

# torchrun's first: under srun plus torchrun, SLURM_LOCALID numbers the agent, not the rank.
LOCAL_RANK_ENV_VARS = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                       "HOROVOD_LOCAL_RANK", "SLURM_LOCALID")


def launch_local_rank() -> int:
    """This process's rank on its host as the launcher states it (0 when not launched)."""
    for var in LOCAL_RANK_ENV_VARS:
        val = os.environ.get(var, "")
        if val.isdigit():
            return int(val)
    return 0


@dataclass(frozen=True)
class Placement:
    """Where one rank computes and how its flat buffers reach the host."""

    kind: str
    """``cpu`` or ``cuda``."""
    index: int | None = None
    """GPU ordinal among the visible ones (None on CPU)."""
    visible_gpus: int = 0
    """GPUs this process sees."""
    local_rank: int = 0
    """Rank on this host, from the launcher's environment."""
    shared_by: int = 1
    """Ranks on this host using the same GPU (1: a GPU of its own; 1 on CPU)."""
    stage: bool = False
    """Flat buffers staged through (pinned) host buffers: always on a GPU, and on CPU when
    forced (tests), so the staging path runs on CPU machines too."""

    @property
    def name(self) -> str:
        """``cpu`` or ``cuda:N``, as torch names devices."""
        return "cpu" if self.kind == "cpu" else f"cuda:{self.index}"

    def to_dict(self) -> dict[str, Any]:
        """The placement for the record."""
        return {**asdict(self), "name": self.name}


CPU = Placement("cpu")


def resolve_device(requested: str, visible_gpus: int, local_rank: int, local_size: int,
                   stage: bool = False) -> Placement:
    """The placement of this rank for ``device=requested``, given the GPUs it sees.

    Raises:
        HvdscaleError: ``requested`` is ``cuda`` and this process sees no GPU.
    """
    if requested == "cpu" or (requested == "auto" and visible_gpus == 0):
        return Placement("cpu", local_rank=local_rank, stage=stage)
    if visible_gpus == 0:
        cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
        shown = "unset" if cvd is None else repr(cvd)
        raise HvdscaleError(f"device=cuda but this process sees no GPU; CUDA_VISIBLE_DEVICES="
                            f"{shown} (set device=cpu or auto, or give the job GPUs: "
                            "--gpus-per-task / --gres=gpu:N)")
    index = local_rank % visible_gpus
    # Local ranks l with l % g == index share this GPU.
    shared = len(range(index, max(local_size, local_rank + 1), visible_gpus))
    if shared > 1 and local_rank == index:  # one warning per shared GPU
        print(f"hvdscale: warning: {max(local_size, 1)} ranks on this host share "
              f"{visible_gpus} GPU(s); GPU {index} is used by {shared} ranks (recorded as "
              "shared_by)", file=sys.stderr, flush=True)
    return Placement("cuda", index, visible_gpus, local_rank, shared, stage=True)
