"""Every rank builds the same model: a custom model's parameter shapes checked against rank 0's
before the first step (a shipped model is built from the shared config alone)."""

from __future__ import annotations

from hvdscale.config import ModelConfig
from hvdscale.core.supervise import phase
from hvdscale.core.world import World
from hvdscale.errors import HvdscaleError
from hvdscale.models.custom import shape_mismatch
from hvdscale.strategies.base import Adapter


def check_same_shapes(model: ModelConfig, adapter: Adapter, world: World) -> None:
    """Raise the same HvdscaleError on every rank when some rank's (name, shape) list differs
    from rank 0's (the first such rank and its first difference named), so the job ends with
    one message before any parameter is broadcast or reduced."""
    if model.kind != "custom":
        return
    phase("parameter shapes compared with rank 0's", waiting=True)
    everyone = world.allgather(adapter.param_shapes())  # hvd: world's existing allgather
    for rank, theirs in enumerate(everyone[1:], start=1):
        diff = shape_mismatch(theirs, everyone[0])
        if diff is not None:
            raise HvdscaleError(f"model.builder {model.builder!r} built different parameter "
                                f"shapes on rank {rank} than on rank 0 ({diff}); the builder "
                                "must build the same model on every rank")
