"""DDP's rendezvous port on a node another job shares (issue 29, finding 8): rank 0 binds its
TCPStore before the port is published, so a MASTER_PORT another process holds is one clear
error on every rank, before any process group exists, and no rank waits."""

from __future__ import annotations

import socket

import pytest

from hvdscale.core.world import is_torchrun_launch
from hvdscale.errors import HvdscaleError
from tests.exactness import config, distributed

pytestmark = [pytest.mark.np3, pytest.mark.skipif(
    is_torchrun_launch(), reason="under torchrun its store is the rendezvous: no port to take")]


def test_a_taken_master_port_is_one_error_on_every_rank(comm_world, monkeypatch) -> None:
    other_job = socket.create_server(("", 0)) if comm_world.rank == 0 else None
    try:
        port = comm_world.bcast(other_job.getsockname()[1] if other_job else None)
        monkeypatch.setenv("MASTER_PORT", str(port))
        monkeypatch.delenv("MASTER_ADDR", raising=False)
        with pytest.raises(HvdscaleError) as err:
            distributed(config("torch", "ddp"), comm_world)
    finally:
        if other_job is not None:
            other_job.close()
    msg = str(err.value)
    assert f"could not listen on port {port}" in msg, msg
    assert comm_world.allgather(msg) == [msg] * comm_world.size
