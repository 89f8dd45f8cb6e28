"""The side channel's wire format (hvdscale.core.peers_wire) without sockets, fast enough to be
the mutation benchmark's CI slice (issue 39): every check of an ask and a reply at its edges."""

from __future__ import annotations

import hashlib
import hmac
import struct

import pytest

from hvdscale.core import peers_wire as wire

KEY = bytes(range(wire.KEY_LEN))
NONCE = bytes(range(100, 100 + wire.NONCE_LEN))
LAYOUT = struct.Struct("!IiBBdB")  # rank, step, kind, flags, for_s, phase length


def _signed(data: bytes, key: bytes = KEY) -> bytes:
    return data + hmac.new(key, data, hashlib.sha256).digest()


def _reply(rank: int = 2, step: int = 3, kind: int = 0, flags: int = 2, for_s: float = 1.5,
           text: bytes = b"step 3", n: int | None = None, nonce: bytes = NONCE) -> bytes:
    body = LAYOUT.pack(rank, step, kind, flags, for_s, len(text) if n is None else n)
    return _signed(b"hvr1" + nonce + body + text)


def test_sizes_and_keys() -> None:
    assert (wire.KEY_LEN, wire.NONCE_LEN, wire.MAC_LEN) == (32, 16, 32)
    assert wire.ASK_LEN == 52 and wire.REPLY_MAX == 4 + 16 + LAYOUT.size + 96 + 32 == 167
    keys = {wire.new_key() for _ in range(4)}
    assert len(keys) == 4 and all(len(k) == 32 for k in keys)


def test_an_ask_is_magic_nonce_and_mac() -> None:
    nonce, ask = wire.make_ask(KEY)
    assert len(nonce) == 16 and ask == _signed(b"hvq1" + nonce)
    assert wire.make_ask(KEY)[0] != nonce
    assert wire.read_ask(KEY, ask) == nonce
    for bad in (ask[:-1], ask + b"x", b"hvr1" + ask[4:], _signed(b"hvq1" + nonce, bytes(32)),
                ask[:-1] + bytes([ask[-1] ^ 1]), b""):
        assert wire.read_ask(KEY, bad) is None, bad
    # Correctly signed, yet not an ask: another length, another magic.
    for signed in (_signed(b"hvq1" + nonce + b"x"), _signed(b"hvq1" + nonce[:-1]),
                   _signed(b"hvr1" + nonce)):
        assert wire.read_ask(KEY, signed) is None, signed


def test_kind_of() -> None:
    assert wire.kind_of({"kind": "joined", "waiting": True}) == "joined"
    assert wire.kind_of({"waiting": True}) == "communicate"
    assert wire.kind_of({"waiting": False}) == "compute" == wire.kind_of({})


def test_a_reply_is_the_fixed_layout_signed() -> None:
    state = {"phase": "step 3", "step": 3, "kind": "overlapped", "for_s": 1.5, "waiting": True}
    msg = wire.make_reply(KEY, NONCE, 2, state)
    assert msg == _reply(kind=2, flags=3)
    assert wire.read_reply(KEY, msg, NONCE, 2) == state
    between = {**state, "step": None, "waiting": False, "kind": "compute", "for_s": 0.0}
    assert wire.make_reply(KEY, NONCE, 7, between) == _reply(7, 0, 0, 0, 0.0)
    assert wire.read_reply(KEY, wire.make_reply(KEY, NONCE, 7, between), NONCE, 7) == between
    # Without a for_s, zero seconds; a missing phase is empty; step 0 is a step.
    assert wire.make_reply(KEY, NONCE, 1, {"step": 0}) == _reply(1, 0, 0, 2, 0.0, b"")


@pytest.mark.parametrize(("code", "kind"),
                         [(0, "compute"), (1, "communicate"), (2, "overlapped"), (3, "joined")])
def test_every_phase_kind_travels_as_its_code(code: int, kind: str) -> None:
    """The kinds are part of the wire: each name has its fixed code, both ways; a rank waiting
    in a collective with no kind of its own is sent as "communicate"."""
    state = {"phase": "p", "step": 3, "kind": kind, "for_s": 1.5, "waiting": False}
    msg = wire.make_reply(KEY, NONCE, 2, state)
    assert msg == _reply(kind=code, flags=2, text=b"p")
    assert wire.read_reply(KEY, msg, NONCE, 2) == state
    if kind == "communicate":
        waiting = {"phase": "p", "step": 3, "for_s": 1.5, "waiting": True}
        assert wire.read_reply(KEY, wire.make_reply(KEY, NONCE, 2, waiting), NONCE, 2) == {
            **waiting, "kind": "communicate"}


@pytest.mark.parametrize(("field", "ok", "bad"), [
    ("step", [-2**31, 2**31 - 1, -1, 0], [2**31, -2**31 - 1, 1.0, True and "1"]),
    ("for_s", [0.0, 1e9, "2.5"], [-1e-9, 1e9 * (1 + 1e-15), float("nan"), float("inf"), "x", None]),
])
def test_reply_values_at_their_edges(field: str, ok: list, bad: list) -> None:
    base = {"phase": "p", "step": 1, "kind": "compute", "for_s": 1.0, "waiting": False}
    for v in ok:
        got = wire.read_reply(KEY, wire.make_reply(KEY, NONCE, 0, {**base, field: v}), NONCE, 0)
        assert got is not None and got[field] == (float(v) if field == "for_s" else v), v
    for v in bad:
        assert wire.make_reply(KEY, NONCE, 0, {**base, field: v}) is None, v


def test_the_phase_is_cut_at_96_bytes_on_a_character() -> None:
    long = "é" * 60  # 120 bytes: cut at 96, a whole number of characters
    got = wire.read_reply(KEY, wire.make_reply(KEY, NONCE, 0, {"phase": long, "step": 1}), NONCE, 0)
    assert got["phase"] == "é" * 48
    odd = "a" + "é" * 60  # the cut falls inside a character: that character is dropped
    got = wire.read_reply(KEY, wire.make_reply(KEY, NONCE, 0, {"phase": odd, "step": 1}), NONCE, 0)
    assert got["phase"] == "a" + "é" * 47
    exact = "x" * 96
    msg = wire.make_reply(KEY, NONCE, 0, {"phase": exact, "step": 1})
    assert len(msg) == wire.REPLY_MAX and wire.read_reply(KEY, msg, NONCE, 0)["phase"] == exact


@pytest.mark.parametrize("state", ["x", None, {"kind": "sleeping"}])
def test_states_outside_the_schema_send_nothing(state: object) -> None:
    assert wire.make_reply(KEY, NONCE, 0, state) is None


def test_every_reply_field_is_checked() -> None:
    assert wire.read_reply(KEY, _reply(), NONCE, 2) == {
        "phase": "step 3", "step": 3, "kind": "compute", "for_s": 1.5, "waiting": False}
    assert wire.read_reply(KEY, _reply(kind=3, flags=1), NONCE, 2)["kind"] == "joined"
    assert wire.read_reply(KEY, _reply(for_s=1e9), NONCE, 2)["for_s"] == 1e9
    assert wire.read_reply(KEY, _reply(text=b"", n=0), NONCE, 2)["phase"] == ""
    bad = [_reply(rank=3), _reply(kind=4), _reply(flags=4), _reply(for_s=-0.5),
           _reply(for_s=1e9 * (1 + 1e-15)), _reply(for_s=float("nan")), _reply(n=5),
           _reply(n=7), _reply(text=b"\xc3"), _reply(text=b"tab\t"),
           _reply(nonce=NONCE[:-1] + b"\0"), _reply()[:-1] + b"\0",
           _signed(b"hvr1" + NONCE + LAYOUT.pack(2, 3, 0, 2, 1.5, 0), bytes(32))]
    for i, msg in enumerate(bad):
        assert wire.read_reply(KEY, msg, NONCE, 2) is None, i


def test_reply_lengths_at_their_edges() -> None:
    shortest = _reply(text=b"")
    assert len(shortest) == 4 + 16 + LAYOUT.size + 32
    assert wire.read_reply(KEY, shortest, NONCE, 2) is not None
    assert wire.read_reply(KEY, _signed(shortest[:-33]), NONCE, 2) is None  # one byte short
    longest = _reply(text=b"x" * 96)
    assert len(longest) == wire.REPLY_MAX and wire.read_reply(KEY, longest, NONCE, 2)
    assert wire.read_reply(KEY, _reply(text=b"x" * 97), NONCE, 2) is None
    assert wire.read_reply(KEY, b"hvq1" + shortest[4:], NONCE, 2) is None
