"""The side channel's datagrams (hvdscale.core.peers): signed, fixed-schema, small.

Every ask and every reply carries an HMAC-SHA256 under the job's key (random, made by rank 0,
shared over the world's start-up allgather), over all of its other bytes; nothing in a datagram
is believed before that MAC has been checked (``hmac.compare_digest``). An ask is a magic, a
random nonce of fixed length and the MAC (52 bytes); a reply is a magic, the ask's nonce, the
answering rank's state in a fixed binary layout, and the MAC (at most 167 bytes). A reply echoes
nothing of an ask but its 16-byte nonce. Every field of a reply is checked (rank, kinds, ranges,
finite numbers, printable text) before it reaches a message.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
import struct
from typing import Any

KEY_LEN = 32
NONCE_LEN = 16
MAC_LEN = 32
_ASK_MAGIC = b"hvq1"
_REPLY_MAGIC = b"hvr1"
ASK_LEN = len(_ASK_MAGIC) + NONCE_LEN + MAC_LEN
# rank, step (warm-up steps are negative), kind (index into KINDS), flags (_WAITING, _IN_STEP),
# seconds in the phase, length of the phase's name in bytes.
_BODY = struct.Struct("!IiBBdB")
PHASE_MAX = 96  # bytes of the phase's name sent; the runner's names are shorter
_REPLY_MIN = len(_REPLY_MAGIC) + NONCE_LEN + _BODY.size + MAC_LEN
REPLY_MAX = _REPLY_MIN + PHASE_MAX
KINDS = ("compute", "communicate", "overlapped", "joined")
_WAITING, _IN_STEP = 1, 2
_MAX_S = 1e9  # longer than any job: a larger time in a phase is not a real one


def new_key() -> bytes:
    """A fresh random key for one job."""
    return secrets.token_bytes(KEY_LEN)


def _mac(key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hashlib.sha256).digest()


def _signed(key: bytes, data: bytes) -> bytes:
    return data + _mac(key, data)


def _verified(key: bytes, msg: bytes) -> bytes | None:
    """``msg`` without its MAC when the MAC is right, else None."""
    data, mac = msg[:-MAC_LEN], msg[-MAC_LEN:]
    return data if hmac.compare_digest(mac, _mac(key, data)) else None


def make_ask(key: bytes) -> tuple[bytes, bytes]:
    """A fresh nonce and the signed ask carrying it."""
    nonce = secrets.token_bytes(NONCE_LEN)
    return nonce, _signed(key, _ASK_MAGIC + nonce)


def read_ask(key: bytes, msg: bytes) -> bytes | None:
    """The nonce of a well-formed, correctly signed ask; None for anything else."""
    if len(msg) != ASK_LEN or not msg.startswith(_ASK_MAGIC):
        return None
    data = _verified(key, msg)
    return data[len(_ASK_MAGIC):] if data is not None else None


def kind_of(state: dict[str, Any]) -> str:
    """The phase kind of a state; states without one say only whether they wait."""
    return str(state.get("kind") or ("communicate" if state.get("waiting") else "compute"))


def make_reply(key: bytes, nonce: bytes, rank: int, state: Any) -> bytes | None:
    """The signed reply of ``rank`` with ``state`` (as ``current_state`` gives it) to the ask
    carrying ``nonce``; None when the state cannot be sent as the fixed schema says."""
    if not isinstance(state, dict) or kind_of(state) not in KINDS:
        return None
    step = state.get("step")
    try:
        for_s = float(state.get("for_s", 0.0))
    except (TypeError, ValueError):
        return None
    if (step is not None and not (isinstance(step, int) and -2**31 <= step < 2**31)) \
            or not 0.0 <= for_s <= _MAX_S:
        return None
    phase = str(state.get("phase", "")).encode()[:PHASE_MAX].decode(errors="ignore").encode()
    flags = (_WAITING if state.get("waiting") else 0) | (0 if step is None else _IN_STEP)
    body = _BODY.pack(rank, step or 0, KINDS.index(kind_of(state)), flags, for_s, len(phase))
    return _signed(key, _REPLY_MAGIC + nonce + body + phase)


def read_reply(key: bytes, msg: bytes, nonce: bytes, rank: int) -> dict[str, Any] | None:
    """The state in a reply from ``rank`` (the rank whose address it came from) to the ask
    carrying ``nonce``; None unless the reply is well formed, correctly signed, answers that
    ask, names that rank and holds only valid values."""
    if not _REPLY_MIN <= len(msg) <= REPLY_MAX or not msg.startswith(_REPLY_MAGIC):
        return None
    at = len(_REPLY_MAGIC)
    if not hmac.compare_digest(msg[at:at + NONCE_LEN], nonce):
        return None
    data = _verified(key, msg)
    if data is None:
        return None
    at += NONCE_LEN
    r, step, kind, flags, for_s, n = _BODY.unpack_from(data, at)
    text = data[at + _BODY.size:]
    if (r != rank or kind >= len(KINDS) or flags > _WAITING | _IN_STEP or len(text) != n
            or not math.isfinite(for_s) or not 0.0 <= for_s <= _MAX_S):
        return None
    try:
        phase = text.decode()
    except UnicodeDecodeError:
        return None
    if not phase.isprintable():
        return None
    return {"phase": phase, "step": step if flags & _IN_STEP else None, "kind": KINDS[kind],
            "for_s": for_s, "waiting": bool(flags & _WAITING)}
