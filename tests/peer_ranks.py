"""Ranks of the side channel (hvdscale.core.peers) in one process, for tests: each rank's
``start_peers`` runs in its own thread, joined by an allgather made of a barrier, on real UDP
sockets of this host. A hook may rewrite what the allgather returns (a rank's endpoint taken
over by a forger, as a stranger on the network would hold an address the asks reach)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from typing import Any

from hvdscale.core import peers
from hvdscale.core import peers_wire as wire

Tamper = Callable[[list[Any]], None]
Forge = Callable[[bytes], list[bytes]]


class Forger:
    """A stranger's socket on loopback that answers every datagram it gets with ``forge``'s
    datagrams (it sees the asks: it holds an address they reach)."""

    def __init__(self, forge: Forge) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.forge, self.seen, self._stop = forge, 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                msg, sender = self.sock.recvfrom(4096)
            except OSError:
                continue
            self.seen += 1
            for out in self.forge(msg):
                self.sock.sendto(out, sender)

    def close(self) -> None:
        self._stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


def nonce_of(msg: bytes) -> bytes:
    """The nonce of an ask as a stranger who sees it reads it (either wire format)."""
    return msg[len(b"hvdscale?"):] if msg.startswith(b"hvdscale?") else msg[4:4 + wire.NONCE_LEN]


def old_style(rank: int, state: Any) -> Forge:
    """A JSON reply echoing the ask's nonce, as the unsigned channel accepted."""
    return lambda msg: [json.dumps({"rank": rank, "nonce": nonce_of(msg).decode(errors="replace"),
                                    "state": state}).encode()]


def start_ranks(states: dict[int, Callable[[], Any]],
                tamper: Tamper | None = None) -> dict[int, peers.Peers]:
    """Start ranks 0..n-1 (``states[r]`` answers for rank r); ``peers._peers`` is left as
    rank 0's, the rank that asks in the tests."""
    n = len(states)
    slots: list[Any] = [None] * n
    barrier = threading.Barrier(n, timeout=60)
    done: dict[int, peers.Peers] = {}
    failed: list[BaseException] = []

    def allgather(rank: int, obj: Any) -> list[Any]:
        slots[rank] = obj
        if barrier.wait() == 0 and tamper is not None:
            tamper(slots)  # one thread rewrites, while the others wait at the next barrier
        barrier.wait()
        out = [dict(s) if isinstance(s, dict) else s for s in slots]
        barrier.wait()
        return out

    def one(rank: int) -> None:
        try:
            done[rank] = peers.start_peers(rank, lambda o: allgather(rank, o), states[rank])
        except BaseException as exc:  # reported by the caller
            failed.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=one, args=(r,), daemon=True) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    if failed:
        raise failed[0]
    peers._peers = done[0]
    return done


def stop_ranks(ranks: dict[int, peers.Peers]) -> None:
    """Close every rank's sockets (where this version of the channel can)."""
    for p in ranks.values():
        close = getattr(p, "close", None)
        if close is not None:
            close()
    peers._peers = None


def take_endpoint(rank: int, sock: socket.socket) -> Tamper:
    """A hook that points ``rank``'s answering endpoint at ``sock`` (bound on loopback)."""
    def tamper(slots: list[Any]) -> None:
        if all(isinstance(s, dict) and "port" in s for s in slots):
            slots[rank] = {**slots[rank], "port": sock.getsockname()[1]}
    return tamper


def step_state(step: int, kind: str, for_s: float = 7.0) -> dict[str, Any]:
    """A rank's answer in a step, as StepWatchdog.state() gives it (what the wire carries)."""
    return {"phase": f"step {step}", "step": step, "kind": kind, "for_s": for_s,
            "waiting": kind != "compute"}


def forged_job(made: list[Any], rank: int, forge: Forge) -> dict[int, peers.Peers]:
    """Ranks 0-2 (rank 1 busy in step 3, ranks 0 and 2 waiting) with ``rank``'s answering
    address held by a ``Forger``; both go into ``made`` for ``close_made``."""
    f = Forger(forge)
    made.append(f)
    states = {0: step_state(3, "communicate"), 1: step_state(3, "compute", 24.0),
              2: step_state(3, "communicate")}
    ps = start_ranks({r: lambda r=r: states[r] for r in states}, take_endpoint(rank, f.sock))
    made.append(ps)
    return ps


def close_made(made: list[Any]) -> None:
    """Close the forgers and stop the ranks ``forged_job`` made."""
    for m in made:
        m.close() if isinstance(m, Forger) else stop_ranks(m)
