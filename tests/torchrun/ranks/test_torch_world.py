"""The harness's collectives over torchrun's world, on every rank: what the runner, the
preflight, the side channel and DDP's rendezvous ask of a world, with no MPI present."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from hvdscale.core.world import is_torchrun_launch, launch_kind, launch_rank

pytestmark = pytest.mark.skipif(not is_torchrun_launch(), reason="a torchrun launch only")


def test_the_launch_is_torchruns_and_mpi_never_loaded(comm_world) -> None:
    assert launch_kind() == "torchrun" and comm_world.backend == "torchrun"
    assert launch_rank() == comm_world.rank and comm_world.size >= 2
    assert 0 <= comm_world.local_rank < comm_world.local_size
    assert "mpi4py.MPI" not in sys.modules


def test_sum_gather_and_broadcast_are_exact_and_in_rank_order(comm_world) -> None:
    w, n = comm_world, comm_world.size
    got = w.allreduce_sum(np.array([w.rank + 0.25, 1.0, 2.0**-40]))
    assert got.tolist() == [n * (n - 1) / 2 + 0.25 * n, float(n), n * 2.0**-40]
    # Objects of different sizes per rank: padding must not leak into what is unpickled.
    mine = {"rank": w.rank, "text": "x" * (1000 * w.rank), "nested": [w.rank] * (w.rank + 1)}
    everyone = w.allgather(mine)
    assert [e["rank"] for e in everyone] == list(range(n))
    assert everyone[n - 1] == {"rank": n - 1, "text": "x" * (1000 * (n - 1)),
                               "nested": [n - 1] * n}
    for root in (0, n - 1):
        assert w.bcast(("from", w.rank) if w.rank == root else None, root=root) == ("from", root)
    w.barrier()


def test_each_world_and_rendezvous_store_is_a_key_space_of_its_own(comm_world) -> None:
    from hvdscale.core.world_torch import TorchWorld

    other = TorchWorld()  # a second point's world in one process
    try:
        assert other.allgather(comm_world.rank) == list(range(comm_world.size))
        a, b = comm_world.rendezvous_store("t"), comm_world.rendezvous_store("t")
        if comm_world.rank == 0:
            a.set("k", "first")
            b.set("k", "second")
        comm_world.barrier()
        assert (a.get("k"), b.get("k")) == (b"first", b"second")
    finally:
        other.close()


def test_a_plugin_on_the_worlds_collectives_is_exact_under_torchrun(comm_world) -> None:
    import tests.toy_strategy  # noqa: F401  (registers "toy", declared to run under torchrun)
    from hvdscale.registry import get
    from tests.exactness import check_exact, config, distributed

    assert "torchrun" in get("toy").launches
    cfg = config("torch", "toy")
    params, _ = distributed(cfg, comm_world)
    check_exact(cfg, params, comm_world.size, 1e-5)
