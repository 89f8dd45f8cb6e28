"""The side channel (hvdscale.core.peers) against two attacks its first tests never tried
(issue 39): a correctly signed reply to another ask (a replay, by a rank of the job or by anyone
who recorded one) is refused, and the reader stops at its deadline however many datagrams wait
(a flood faster than the reader must not hold the asker)."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from hvdscale.core import peers
from hvdscale.core import peers_wire as wire
from tests.peer_ranks import (
    Forge,
    close_made,
    forged_job,
    nonce_of,
    start_ranks,
    step_state,
    stop_ranks,
)

BUSY = step_state(3, "compute", 24.0)
WAITING = step_state(3, "communicate")


def test_a_signed_reply_to_another_ask_is_refused_by_the_wire() -> None:
    key = wire.new_key()
    asked, other = wire.make_ask(key)[0], wire.make_ask(key)[0]
    reply = wire.make_reply(key, other, 2, BUSY)
    assert wire.read_reply(key, reply, other, 2) == BUSY  # the ask it answers: believed
    assert wire.read_reply(key, reply, asked, 2) is None  # any other ask: refused
    # The nonce is checked on all of its bytes, first and last alike.
    for i in (0, wire.NONCE_LEN - 1):
        near = bytearray(other)
        near[i] ^= 1
        assert wire.read_reply(key, reply, bytes(near), 2) is None, i


@pytest.fixture
def replayer() -> Iterator[Callable[[Forge], dict[int, peers.Peers]]]:
    """Ranks 0-2 (rank 1 busy), rank 2's answering address held by a replayer."""
    made: list[Any] = []
    yield lambda forge: forged_job(made, 2, forge)
    close_made(made)


def test_a_replayed_signed_reply_is_not_believed(replayer: Callable) -> None:
    """The replayer holds a reply the job's key signed, for an earlier ask; it sends that
    recorded reply to every later ask, never one for the ask it sees."""
    recorded: dict[str, bytes] = {}

    def forge(msg: bytes) -> list[bytes]:
        seen = nonce_of(msg)
        return [r for r in recorded.values() if r[4:4 + wire.NONCE_LEN] != seen]

    ps = replayer(forge)
    earlier = wire.make_ask(ps[0].key)[0]
    recorded["earlier"] = wire.make_reply(ps[0].key, earlier, 2, step_state(9, "compute", 99.0))
    got = ps[0].ask(timeout_s=0.6)
    assert got == {1: BUSY, 2: None}, got


def test_the_reader_stops_at_its_deadline_whatever_waits() -> None:
    """A backlog is a flood that outran the reader: past its deadline, ``_read`` takes none of
    it (and with the deadline a few ms away, far from all of it)."""
    ps = start_ranks({0: lambda: WAITING, 1: lambda: BUSY})
    try:
        target = ("127.0.0.1", ps[0].me["ask_port"])
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for _ in range(40):
                s.sendto(b"hvr1" + os.urandom(60), target)
        time.sleep(0.2)  # loopback delivers at once; leave it time all the same
        got: dict[int, Any] = {}
        ps[0]._read(os.urandom(wire.NONCE_LEN), got, time.monotonic() - 1.0)
        left = 0
        try:
            while True:
                ps[0].asker.recvfrom(wire.REPLY_MAX + 1)
                left += 1
        except OSError:
            pass
        assert left == 40, f"the reader took {40 - left} datagrams past its deadline"
        assert got == {}
    finally:
        stop_ranks(ps)
