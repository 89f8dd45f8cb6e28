"""The preflight: every reason a launch cannot run a config, found in one place and said at once.

A config that loaded is still refused for what its world cannot give it: a launch its strategy
runs under (MPI, or torchrun: the registry's ``launches``) or ranks enough for its strategy
(``hvdscale.config.run.check_launch``), a precision this rank's device lacks
(``check_precision_device``), Horovod's NCCL on a GPU that ranks share
(``hvdscale.core.gpu_sharing``), a results directory rank 0 cannot write
(``hvdscale.records.store.check_writable``). Each check stays beside what it knows; this module
runs them all, once the launch is prepared and its world made (the rank count, the device and
the other ranks' GPUs are facts only then) and before the side channel, data or model. One
collective gathers every rank's refusals, so every rank raises the same ``Refused`` listing all
of them, one line each: the user mends them in one go, and no rank waits for one that left.

A new check of a config against its world goes here.
"""

from __future__ import annotations

import importlib
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hvdscale.config.run import RunConfig, check_launch, check_precision_device
from hvdscale.core.device import Placement
from hvdscale.core.gpu_sharing import check_horovod, gpu_key, shared_groups
from hvdscale.core.supervise import phase
from hvdscale.core.world import World, launch_kind
from hvdscale.errors import HvdscaleError
from hvdscale.records.store import check_writable


class Refused(HvdscaleError):
    """Every refusal of one run; a single one reads exactly as its check said it."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        listed = "\n".join(f"  - {line}" for line in lines)
        super().__init__(lines[0] if len(lines) == 1 else
                         f"this run is refused for {len(lines)} reasons:\n{listed}")


def preflight(cfg: RunConfig, out_dir: str | Path, world: World, placement: Placement,
              horovod: str | None) -> list[list[int]]:
    """Check ``cfg`` against its world, on every rank; returns the ranks that share a GPU.

    ``horovod``: the Horovod integration this run started (e.g. ``horovod.torch``), or None.

    Raises:
        Refused: every refusal of any rank, the same on every rank.
    """
    mine = _refused(check_precision_device, cfg.precision, placement.kind)
    mine += _cpu_lstm(cfg, placement)
    if world.rank == 0:  # rank 0 alone writes the record
        mine += _refused(check_writable, out_dir)
    # The one collective: every rank's GPU and refusals, so each rank decides alike.
    phase("preflight: every rank's checks gathered", waiting=True)
    said = world.allgather((gpu_key(socket.gethostname(), placement), mine))
    groups = shared_groups([key for key, _ in said])
    lines = _refused(check_launch, cfg, world.size, launch_kind())
    if groups and horovod is not None and cfg.strategy.name == "horovod":
        nccl = bool(importlib.import_module(horovod).nccl_built())  # hvd:
        lines += _refused(check_horovod, groups, nccl)
    lines += [line for _, theirs in said for line in theirs]
    if lines:
        raise Refused(list(dict.fromkeys(lines)))  # a refusal of several ranks is said once
    return groups


def refuse_launch(cfg: RunConfig) -> None:
    """Refuse a strategy that does not run under this launch (the registry's ``launches``)
    before anything loads: it follows from the config and the launcher's environment alone,
    the same on every rank, so no collective is needed (the preflight says it again).

    Raises:
        Refused: the one line saying why and what to launch instead.
    """
    from hvdscale.registry import get, launch_refusal

    line = launch_refusal(get(cfg.strategy.name), launch_kind())
    if line:
        raise Refused([line])


def _cpu_lstm(cfg: RunConfig, placement: Placement) -> list[str]:
    """A reduced precision this CPU's fused LSTM lacks (PyTorch's oneDNN), tried on this rank."""
    if cfg.framework != "torch" or placement.kind != "cpu" or cfg.model.rnn_impl != "fused":
        return []
    from hvdscale.frameworks.torch.precision import cpu_lstm_refusal

    line = cpu_lstm_refusal(cfg.precision)
    return [f"precision: {line}"] if line else []


def _refused(check: Callable[..., Any], *args: Any) -> list[str]:
    """``check(*args)``'s refusal as a line, or none."""
    try:
        check(*args)
    except HvdscaleError as e:
        return [str(e)]
    return []
