"""Ranks that share one GPU are found over the real world's allgather, and Horovod's NCCL
operations are then refused on every rank alike (issue 31). Every rank claims GPU 0 of its
host, as two ranks on a one-GPU machine do; no GPU is needed to decide."""

from __future__ import annotations

import pytest

from hvdscale.core.device import Placement
from hvdscale.core.gpu_sharing import check_horovod, gather_groups
from hvdscale.core.world import World
from hvdscale.errors import ConfigError


def test_shared_gpu_found_on_every_rank_and_nccl_refused(comm_world: World) -> None:
    groups = gather_groups(comm_world, Placement("cuda", 0, 1, comm_world.local_rank,
                                                 comm_world.local_size))
    # All ranks of these launches run on one host.
    assert groups == [list(range(comm_world.size))]
    with pytest.raises(ConfigError, match="share one GPU"):
        check_horovod(groups, nccl_built=True)
    assert check_horovod(groups, nccl_built=False) == "host copy"
