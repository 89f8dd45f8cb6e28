"""The side channel (hvdscale.core.peers) against a hostile network, on loopback, with real
sockets: forged, unsigned, wrongly signed and misattributed replies are not believed;
strangers get no answer; a flood from source port 0 does not slow the answers; 257 ranks are
all heard. Every flood here is bounded in count and in time."""

from __future__ import annotations

import json
import math
import os
import socket
import struct
import threading
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
    old_style,
    start_ranks,
    step_state,
    stop_ranks,
)

BUSY = step_state(3, "compute", 24.0)
WAITING = step_state(3, "communicate")
@pytest.fixture
def forged() -> Iterator[Callable[[int, Forge], dict[int, peers.Peers]]]:
    """Ranks 0-2 (rank 1 busy), with the answering address of one rank held by a forger."""
    made: list[Any] = []
    yield lambda rank, forge: forged_job(made, rank, forge)
    close_made(made)


def test_a_forged_unsigned_reply_is_not_believed(forged: Callable) -> None:
    def forge(msg: bytes) -> list[bytes]:
        unsigned = b"hvr1" + nonce_of(msg) + struct.pack("!IiBBdB", 2, 3, 0, 0, 99.0, 6) + \
            b"step 3" + bytes(wire.MAC_LEN)
        return [*old_style(2, "x")(msg), unsigned]

    ps = forged(2, forge)
    got = ps[0].ask(timeout_s=0.6)
    assert got == {1: BUSY, 2: None}, got
    # The message names the busy rank and the forged one as silent; nothing raises.
    assert peers.waiting_for("step 3", timeout_s=0.6) == (
        "it waits for rank 1 (busy in step 3 for 24s), "
        "rank 2 (no answer within 0.6s: stopped, frozen or gone)")


def test_a_reply_signed_with_another_key_is_not_believed(forged: Callable) -> None:
    other = wire.new_key()
    ps = forged(2, lambda msg: [wire.make_reply(other, nonce_of(msg), 2, BUSY)])
    assert ps[0].ask(timeout_s=0.6) == {1: BUSY, 2: None}


def test_the_rank_is_the_one_asked_never_the_ones_a_reply_claims(forged: Callable) -> None:
    holder: dict[str, bytes] = {}

    def forge(msg: bytes) -> list[bytes]:
        # Claims to be rank 1, from rank 2's address; signed with the job's key where known (a
        # rank of the job answering for another), unsigned otherwise.
        out = old_style(1, step_state(9, "compute", 99.0))(msg)
        if "key" in holder:
            out.append(wire.make_reply(holder["key"], nonce_of(msg), 1,
                                       step_state(9, "compute", 99.0)))
        return out

    ps = forged(2, forge)
    if hasattr(ps[0], "key"):
        holder["key"] = ps[0].key
    got = ps[0].ask(timeout_s=0.6)
    assert got == {1: BUSY, 2: None}, got  # rank 1's own answer; rank 2 said nothing valid


def test_garbage_in_a_reply_never_raises(forged: Callable) -> None:
    ps = forged(2, old_style(2, "x"))
    assert "rank 2 (no answer" in peers.waiting_for("step 3", timeout_s=0.6)
    key, nonce = ps[0].key, os.urandom(wire.NONCE_LEN)
    good = wire.make_reply(key, nonce, 2, BUSY)
    assert wire.read_reply(key, good, nonce, 2) == BUSY
    # Warm-up steps are negative; between steps there is none: both are carried.
    for st in (step_state(-2, "communicate"), {**WAITING, "step": None, "phase": "phase 'x'"}):
        assert wire.read_reply(key, wire.make_reply(key, nonce, 2, st), nonce, 2) == st

    def signed(rank: int, step: int, kind: int, waiting: int, for_s: float, text: bytes,
               n: int | None = None) -> bytes:
        body = struct.pack("!IiBBdB", rank, step, kind, waiting, for_s,
                           len(text) if n is None else n)
        data = b"hvr1" + nonce + body + text
        return data + wire._mac(key, data)

    bad = [signed(2, 3, 9, 0, 1.0, b"step 3"), signed(2, 3, 0, 4, 1.0, b"step 3"),
           signed(2, 3, 0, 0, math.nan, b"step 3"),
           signed(2, 3, 0, 0, math.inf, b"step 3"), signed(2, 3, 0, 0, -1.0, b"step 3"),
           signed(2, 3, 0, 0, 1.0, b"\xff\xfe"), signed(2, 3, 0, 0, 1.0, b"step\n3"),
           signed(2, 3, 0, 0, 1.0, b"step 3", n=40), signed(1, 3, 0, 0, 1.0, b"step 3"),
           good[:-1], good + b"x", good[:20], b"", good.replace(b"hvr1", b"hvq1", 1)]
    for msg in bad:
        assert wire.read_reply(key, msg, nonce, 2) is None, msg
    for n in range(0, wire.REPLY_MAX + 40, 7):  # random bytes of every length: None, no raise
        assert wire.read_reply(key, os.urandom(n), nonce, 2) is None
    # A rank's own state that the schema cannot carry: no reply at all, nothing raised.
    for state in ("x", None, {"kind": "sleeping"}, {"for_s": "long"}, {"for_s": math.nan},
                  {"step": 2**40}, {"step": "3"}):
        assert wire.make_reply(key, nonce, 2, state) is None, state


@pytest.fixture
def two() -> Iterator[dict[int, peers.Peers]]:
    ps = start_ranks({0: lambda: WAITING, 1: lambda: BUSY})
    yield ps
    stop_ranks(ps)


def _answers(sock: socket.socket, within_s: float = 0.5) -> list[bytes]:
    sock.settimeout(within_s)
    got = []
    try:
        while True:
            got.append(sock.recv(4096))
    except OSError:
        return got


def test_a_stranger_gets_no_answer(two: dict[int, peers.Peers]) -> None:
    target = ("127.0.0.1", two[1].me["port"])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as stranger:
        stranger.bind(("127.0.0.1", 0))
        for ask in (b"hvdscale?1234-5678", b"hvq1" + bytes(wire.NONCE_LEN + wire.MAC_LEN),
                    wire.make_ask(wire.new_key())[1]):
            stranger.sendto(ask, target)
        if hasattr(two[1], "key"):  # even a correctly signed ask: the sender is not a rank
            stranger.sendto(wire.make_ask(two[1].key)[1], target)
        assert _answers(stranger) == []
    # A rank's own asking address with an unsigned ask: no answer either.
    two[0].asker.sendto(b"hvq1" + bytes(wire.NONCE_LEN + wire.MAC_LEN), target)
    assert _answers(two[0].asker) == []
    assert two[0].ask(timeout_s=1.0) == {1: BUSY}  # the ranks still hear each other


def _udp_from_port_0(dst: tuple[str, int], payload: bytes) -> bytes:
    """A UDP datagram (header and payload) from source port 0, for a raw socket."""
    return struct.pack("!HHHH", 0, dst[1], 8 + len(payload), 0) + payload


def test_a_flood_from_port_0_does_not_slow_the_answers(two: dict[int, peers.Peers]) -> None:
    if os.geteuid() != 0:
        pytest.skip("sending from source port 0 needs a raw socket (root)")
    target = ("127.0.0.1", two[1].me["port"])
    stop = threading.Event()
    sent = [0]

    def flood() -> None:  # at most 6,000 datagrams, in bursts of 20, for at most 6 s
        asks = [_udp_from_port_0(target, a) for a in
                (b"hvdscale?" + b"\xff" * 200, wire.make_ask(wire.new_key())[1])]
        with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP) as raw:
            end = time.monotonic() + 6
            while sent[0] < 6000 and not stop.is_set() and time.monotonic() < end:
                for i in range(20):
                    raw.sendto(asks[i % 2], target)
                sent[0] += 20
                time.sleep(0.01)

    t = threading.Thread(target=flood, daemon=True)
    t.start()
    try:
        time.sleep(0.3)  # the flood is under way; ask throughout the next 2 s of it
        asked = answered = 0
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            asked += 1
            answered += two[0].ask(timeout_s=1.0) == {1: BUSY}
            time.sleep(0.05)
        during = sent[0]
    finally:
        stop.set()
        t.join(timeout=10)
    # 200 a second answered 1 ask in 5 before (issue 29): at least that many, or no test.
    assert during >= 400, f"only {during} datagrams sent: no flood to measure under"
    assert answered == asked, f"{answered} of {asked} asks answered under a flood of {during}"


def test_257_ranks_are_all_heard() -> None:
    ps = start_ranks({r: (lambda: WAITING) if r == 0 else (lambda: BUSY) for r in range(257)})
    try:
        got = ps[0].ask(timeout_s=2.0)
        silent = sorted(r for r, st in got.items() if st is None)
        assert len(got) == 256 and not silent, f"{len(silent)} live ranks reported silent"
    finally:
        stop_ranks(ps)


def test_a_flood_of_forged_replies_neither_holds_up_nor_misleads_the_asker(
        two: dict[int, peers.Peers]) -> None:
    target = ("127.0.0.1", two[0].me["ask_port"])
    stop = threading.Event()
    sent = [0]

    def flood() -> None:  # at most 20,000 forged replies, for at most 5 s, as fast as it can
        forged = [b"hvr1" + os.urandom(wire.NONCE_LEN) + os.urandom(40),
                  json.dumps({"rank": 1, "nonce": "0", "state": "x"}).encode()]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            end = time.monotonic() + 5
            while sent[0] < 20000 and not stop.is_set() and time.monotonic() < end:
                s.sendto(forged[sent[0] % 2], target)
                sent[0] += 1

    t = threading.Thread(target=flood, daemon=True)
    t.start()
    try:
        time.sleep(0.2)
        took = []
        for _ in range(3):
            t0 = time.monotonic()
            assert two[0].ask(timeout_s=0.5) == {1: BUSY}
            took.append(time.monotonic() - t0)
    finally:
        stop.set()
        t.join(timeout=10)
    assert max(took) < 1.5, took  # bounded by its own time limit, not by the flood
