"""A whole ``hvdscale run`` of ``strategy.name=ddp`` on every rank, as the CLI runs it: the
record says which DDP settings were in force, the rendezvous was agreed without the user's
MASTER_ADDR/MASTER_PORT, and Horovod was never imported (checked in every rank's
``sys.modules``). Epoch mode with idle ranks runs through the runner's loop with either idle
mode (the join context must be left before the end-of-window barrier)."""

from __future__ import annotations

import os
import sys
import tempfile

import pytest

from hvdscale.config import load_config
from hvdscale.train.runner import run

pytestmark = pytest.mark.np3

TINY = ["model.kind=nmt", "model.embed_dim=16", "model.hidden_size=24", "model.src_vocab=50",
        "model.tgt_vocab=60", "data.batch_size=8", "data.synthetic.max_len=12",
        "data.synthetic.sentences_per_rank=64", "measure.warmup_steps=2", "measure.steps=3",
        "strategy.name=ddp"]


def _run(comm_world, *extra: str) -> dict | None:
    out = comm_world.bcast(tempfile.mkdtemp(prefix="hvdscale-ddp-") if comm_world.rank == 0
                           else None)
    return run(load_config(None, [*TINY, *extra]), out)


def test_a_ddp_run_records_its_settings_and_never_starts_horovod(comm_world) -> None:
    torchrun = comm_world.backend == "torchrun"  # torchrun sets MASTER_ADDR: its store
    assert torchrun or "MASTER_ADDR" not in os.environ, "the test must not set the rendezvous"
    rec = _run(comm_world, "strategy.ddp.bucket_cap_mb=0.5", "strategy.ddp.comm_hook=fp16")
    loaded = comm_world.allgather(sorted(m for m in sys.modules if m.startswith("horovod")))
    assert loaded == [[]] * comm_world.size, f"Horovod imported in a DDP run: {loaded}"
    if comm_world.rank != 0:
        return
    assert rec is not None and rec.status == "ok"
    info = rec.strategy
    assert info["name"] == "ddp" and info["backend"] == "gloo"
    assert info["bucket_cap_mb"] == 0.5 and info["comm_hook"] == "fp16"
    # The hook DDP itself registered (its own logging data), not the setting copied back.
    assert info["ddp_logging"].get("comm_hook") == "fp16_compress_hook", info["ddp_logging"]
    # As torch made it: a bucket_cap_mb given caps the first bucket too (1 MiB only if unset).
    assert info["first_bucket_mb"] == 0.5
    assert info["rendezvous"]["source"] == ("launcher" if torchrun else "agreed")
    assert rec.launcher_backend == comm_world.backend
    assert rec.config.strategy.ddp.comm_hook == "fp16"
    assert rec.horovod_used is None


@pytest.mark.parametrize("idle", ["zero", "join"])
def test_an_epoch_run_with_idle_ranks_finishes(idle, comm_world) -> None:
    rec = _run(comm_world, "measure.epochs=1", "measure.warmup_steps=1",
               "data.bucketing.enabled=true", "data.bucketing.boundaries=[4,7,10]",
               "data.synthetic.sentences_per_rank=40", f"strategy.ddp.idle={idle}")
    if comm_world.rank == 0:
        assert rec is not None
        assert rec.strategy["join"]["used"] == (idle == "join")
        # A rank really ran out of batches and stepped idle (else nothing idle was tested).
        assert len(set(rec.measure.batches_per_rank)) > 1, rec.measure
        assert rec.idle.ranks_out_of_batches, rec.idle
        # Every rank's replica ends the same (join: DDP copies the last rank's parameters).
        prints = {(round(f["sum"], 6), round(f["l2"], 6)) for f in rec.fingerprints}
        assert len(prints) == 1, rec.fingerprints


def test_noise_probe_leaves_ddp_training_alone(comm_world) -> None:
    """Issue 33: autograd.grad on the unwrapped module runs none of DDP's reducer hooks."""
    from tests.noise_probe import check_probe_leaves_training_alone

    check_probe_leaves_training_alone("torch", "ddp", comm_world)
