"""The run's context on this rank: what is settled before any data is read (config, launch,
threads, framework, device, Horovod), handed as one value to the training and the record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hvdscale.config import RunConfig
from hvdscale.core.device import Placement
from hvdscale.core.world import World
from hvdscale.frameworks.base import Framework


@dataclass(frozen=True)
class RunContext:
    """One run's settled facts on this rank."""

    cfg: RunConfig
    world: World
    fw: Framework
    """The loaded framework package (its module-level hooks)."""
    placement: Placement
    intra: int
    """Intra-op threads in force."""
    inter: int
    """Inter-op threads in force."""
    started: str
    """ISO time the run started (UTC, seconds)."""
    argv: list[str] | None
    """The command line for the record (None: this process's ``sys.argv``)."""
    horovod: dict[str, Any]
    """``env``: the Horovod settings exported; ``used``: what each rank's Horovod read (None
    without Horovod)."""
    gpu_groups: list[list[int]] = field(default_factory=list)
    """Ranks that share one GPU, one list per shared GPU (``core.gpu_sharing``); empty when
    every GPU serves one rank, and on the CPU."""
