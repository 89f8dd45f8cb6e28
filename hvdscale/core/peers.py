"""A side channel between the ranks, outside MPI and Horovod: where is each rank now?

A rank that has waited too long in a collective asks every other rank what it is doing, so its
message can name the rank it waits for, or say that it cannot be told. Each rank answers from a
daemon thread over UDP with its own state (run phase or step, the kind of phase it is in there,
waiting or working, for how long), so asking needs nothing of the collective it is stuck in.
Asking cannot hang: every socket call has a timeout, and a rank that does not answer in time
(stopped, frozen, gone) is reported as such.

The channel is closed to everyone outside the job (docs/security-peers.md): rank 0 makes a
random key that the world's start-up allgather shares; every ask and reply is signed with it
(hvdscale.core.peers_wire), and a rank answers only the other ranks' asking sockets, whose
addresses the same start-up exchange gives, on the interface the ranks talk over
(hvdscale.core.peers_addr). Whatever else arrives is dropped without a word.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from hvdscale.core import peers_wire as wire
from hvdscale.core.peers_addr import LOOPBACK, bind_address, candidate_addresses, valid_ipv4
from hvdscale.core.peers_wire import kind_of as _kind

_POLL_S = 0.5  # how often the answering thread sees that it was closed
_ROUNDS = 3  # asks sent to a rank still silent, spread over the time allowed


def _endpoint(info: Any, port: str) -> tuple[str, int]:
    """(address, port) of one rank's start-up entry, checked."""
    addr, num = info.get("addr"), info.get(port)
    if not valid_ipv4(addr) or not isinstance(num, int) or not 0 < num < 65536:
        raise ValueError(f"side channel: bad start-up entry {info!r}")
    return addr, num


class Peers:
    """This rank's answering thread, and what it knows to ask the other ranks."""

    def __init__(self, rank: int, state: Callable[[], Any], key: bytes,
                 addr: str = LOOPBACK) -> None:
        self.rank = rank
        self.state = state
        self.key = key
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # answers
        self.sock.bind((addr, 0))
        self.sock.settimeout(_POLL_S)
        self.asker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # asks, reads replies
        self.asker.bind((addr, 0))
        self.asker.setblocking(False)
        self.me = {"addr": addr, "port": self.sock.getsockname()[1],
                   "ask_port": self.asker.getsockname()[1]}
        self.others: dict[int, tuple[str, int]] = {}  # rank -> where it answers
        self._by_addr: dict[tuple[str, int], int] = {}  # where it answers -> rank
        self._askers: frozenset[tuple[str, int]] = frozenset()  # the only senders answered
        self._ask_lock = threading.Lock()
        self._closed = threading.Event()

    def connect(self, everyone: list[dict[str, Any]]) -> None:
        """Learn every rank's endpoints (this rank's entry included) and start answering."""
        self.others = {r: _endpoint(e, "port") for r, e in enumerate(everyone) if r != self.rank}
        self._by_addr = {ep: r for r, ep in self.others.items()}
        self._askers = frozenset(_endpoint(e, "ask_port")
                                 for r, e in enumerate(everyone) if r != self.rank)
        # Room for every rank's reply at once (the kernel caps it at net.core.rmem_max).
        want = max(64 * 1024, 2048 * len(self.others))
        self.asker.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, min(want, 16 * 1024 * 1024))
        threading.Thread(target=self._answer, name="hvdscale-peers", daemon=True).start()

    def close(self) -> None:
        """Stop answering and close both sockets."""
        self._closed.set()
        self.sock.close()
        self.asker.close()

    def _answer(self) -> None:
        while not self._closed.is_set():
            try:
                msg, sender = self.sock.recvfrom(wire.ASK_LEN + 1)
            except OSError:  # the poll's timeout, or closed
                continue
            # Never sleep here, whatever arrives: a flood must not slow the answers to the job.
            if sender not in self._askers:
                continue  # a stranger, or a forged source port 0: no answer at all
            nonce = wire.read_ask(self.key, msg)
            if nonce is None:
                continue
            try:
                reply = wire.make_reply(self.key, nonce, self.rank, self.state())
                if reply is not None:
                    self.sock.sendto(reply, sender)
            except Exception:  # one failed answer must not end the answering
                continue

    def _read(self, nonce: bytes, got: dict[int, dict[str, Any] | None], until: float) -> None:
        """Take the replies already waiting (until ``until``: a flood must not hold the asker
        past its time); believe only signed ones from the rank asked."""
        while time.monotonic() < until:
            try:
                msg, sender = self.asker.recvfrom(wire.REPLY_MAX + 1)
            except OSError:  # nothing more now
                return
            rank = self._by_addr.get(sender)  # the rank is where it came from, not its claim
            if rank is None or got.get(rank) is not None:
                continue
            got[rank] = wire.read_reply(self.key, msg, nonce, rank)

    def ask(self, timeout_s: float = 2.0) -> dict[int, dict[str, Any] | None]:
        """Every other rank's state, or None for a rank that did not answer in ``timeout_s``."""
        got: dict[int, dict[str, Any] | None] = {r: None for r in self.others}
        with self._ask_lock:
            self._read(b"", {}, time.monotonic() + 0.05)  # late replies to an earlier ask
            nonce, msg = wire.make_ask(self.key)
            start = time.monotonic()
            for n in range(1, _ROUNDS + 1):
                end = start + timeout_s * n / _ROUNDS
                todo = [r for r, st in got.items() if st is None]
                if not todo:
                    break
                self._round(msg, nonce, todo, got, end)
        return got

    def _round(self, msg: bytes, nonce: bytes, todo: list[int],
               got: dict[int, dict[str, Any] | None], end: float) -> None:
        """Ask the ranks in ``todo``, reading replies while sending, until ``end``."""
        while (left := end - time.monotonic()) > 0:
            if todo and got[todo[0]] is not None:
                todo.pop(0)  # it answered an earlier round's ask meanwhile
                continue
            if todo:
                try:
                    self.asker.sendto(msg, self.others[todo[0]])
                except BlockingIOError:  # send buffer full: wait for room, or replies
                    select.select([self.asker], [self.asker], [], min(left, 0.01))
                    continue
                except OSError:
                    pass  # unreachable now: it stays silent unless a later round reaches it
                todo.pop(0)
                self._read(nonce, got, end)
                continue
            if all(st is not None for st in got.values()):
                return
            ready, _, _ = select.select([self.asker], [], [], left)
            if ready:
                self._read(nonce, got, end)


_peers: Peers | None = None


def start_peers(rank: int, allgather: Callable[[Any], list[Any]],
                state: Callable[[], dict[str, Any]]) -> Peers:
    """Start answering, and learn the job's key and every rank's endpoints through
    ``allgather`` (a collective: every rank calls this once, at start-up)."""
    global _peers
    key = wire.new_key() if rank == 0 else None
    offer = {"host": socket.gethostname(), "addrs": candidate_addresses(),
             "key": key.hex() if key is not None else None}
    offers = allgather(offer)  # hvd: once, at start-up; rank 0's entry carries the key
    shared = offers[0].get("key")
    if not isinstance(shared, str) or len(shared) != 2 * wire.KEY_LEN:
        raise ValueError("side channel: rank 0 shared no key at start-up")
    p = Peers(rank, state, bytes.fromhex(shared), bind_address(rank, offers))
    p.connect(allgather(p.me))  # hvd: once, at start-up: where each rank asks and answers
    _peers = p
    return p


def stop_peers(p: Peers) -> None:
    """Close ``p`` (one point's side channel in a shared launch); the next point starts its own."""
    global _peers
    p.close()
    if _peers is p:
        _peers = None


def ask_peers(timeout_s: float = 2.0) -> dict[int, dict[str, Any] | None] | None:
    """Every other rank's state (None: no answer); None before ``start_peers``."""
    return _peers.ask(timeout_s) if _peers is not None else None


# What a rank in each kind of phase is doing, in a message (kinds: StepWatchdog.phase()).
_KIND_WORDS = {"compute": "busy in", "communicate": "waiting in",
               "overlapped": "computing and communicating (one call) in",
               "joined": "joined (out of batches) in"}


def _doing(state: dict[str, Any]) -> str:
    what = _KIND_WORDS.get(_kind(state), "waiting in" if state.get("waiting") else "busy in")
    return f"{what} {state.get('phase', '?')} for {float(state.get('for_s', 0)):.0f}s"


def _silent(ranks: list[int], timeout_s: float, most: int) -> str:
    """The ranks that did not answer, the list cut at ``most`` with an honest count."""
    shown = ", ".join(str(r) for r in ranks[:most])
    more = f" and {len(ranks) - most} more" if len(ranks) > most else ""
    who = f"rank {shown}" if len(ranks) == 1 else f"ranks {shown}{more}"
    return f"{who} (no answer within {timeout_s:g}s: stopped, frozen or gone)"


def _cut(named: list[str], most: int, what: str) -> list[str]:
    return [*named[:most], f"{len(named) - most} more {what}"] if len(named) > most else named


def blame(where: str, answers: dict[int, dict[str, Any] | None],
          mine: tuple[int, dict[str, Any]] | None = None,
          timeout_s: float = 2.0, most: int = 8) -> str:
    """The clause of a message from a rank waiting in ``where`` (e.g. ``step 3``) that says whom
    it waits for, from the other ranks' ``answers`` (None: no answer) and its own ``mine``
    (rank, state). Named first: ranks busy with their own work (the slow ones), then the ranks
    that do not answer (in a large job some may be live ranks whose answer was lost; each list
    is cut at ``most`` with a count, so neither hides the other); when every rank answers and
    waits, those waiting somewhere else, except joined ranks (out of batches by design: nobody
    waits for them). When the ranks left are inside the step's combined compute+communication
    call (DDP's backward, MWMS's graph call), the slow one cannot be told from those waiting
    for it, and the clause says so. "" when nothing can be said.
    """
    silent = [r for r, st in sorted(answers.items()) if st is None]
    busy = _cut([f"rank {r} ({_doing(st)})" for r, st in sorted(answers.items())
                 if st is not None and not st.get("waiting")], most, "busy ranks")
    named = busy + ([_silent(silent, timeout_s, most)] if silent else [])
    if not named:
        named = _cut([f"rank {r} ({_doing(st)})" for r, st in sorted(answers.items())
                      if st is not None and st.get("phase") != where and _kind(st) != "joined"],
                     most, "ranks")
    if named:
        return "it waits for " + ", ".join(named)
    inside = {r: st for r, st in answers.items() if st is not None and _kind(st) == "overlapped"}
    if mine is not None and _kind(mine[1]) == "overlapped":
        inside[mine[0]] = mine[1]
    if not inside:
        return ""
    ranks = ",".join(str(r) for r in sorted(inside))
    longest = max(float(st.get("for_s", 0)) for st in inside.values())
    who = f"ranks {ranks} are all" if len(inside) > 1 else f"rank {ranks} is"
    return (f"{who} inside {where}'s combined compute+communication call (DDP's backward, "
            f"MWMS's graph call; up to {longest:.0f}s): the slowest cannot be told apart from "
            f"those waiting for it")


def waiting_for(where: str, timeout_s: float = 2.0, most: int = 8) -> str:
    """Ask the other ranks, and say whom this rank, waiting in ``where``, waits for (see
    :func:`blame`); "" when no one can be named or there is no side channel."""
    p = _peers
    try:
        answers = ask_peers(timeout_s)
        if not answers:
            return ""
        mine = (p.rank, p.state()) if p is not None else None
        return blame(where, answers, mine, timeout_s, most)
    except Exception:  # the message must still be printed and the job ended
        return ""
