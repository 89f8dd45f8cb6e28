"""A side channel between the ranks, outside MPI and Horovod: where is each rank now?

A rank that has waited too long in a collective asks every other rank what it is doing, so its
message can name the rank it waits for, or say that it cannot be told. Each rank answers from a
daemon thread over UDP with its own state (run phase or step, the kind of phase it is in there,
waiting or working, for how long), so asking needs nothing of the collective it is stuck in.
Asking cannot hang: every socket call has a timeout, and a rank that does not answer in time
(stopped, frozen, gone) is reported as such.

The ranks' addresses are exchanged once, at start-up, with the world's allgather.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

_ASK = b"hvdscale?"
_MAX_REPLY = 4096


def _host_addresses() -> list[str]:
    """This host's IPv4 addresses (loopback first): a peer on any network can reach one."""
    import psutil

    addrs = ["127.0.0.1"]
    for entries in psutil.net_if_addrs().values():
        for e in entries:
            if e.family == socket.AF_INET and e.address not in addrs:
                addrs.append(e.address)
    return addrs


class Peers:
    """This rank's answering thread, and what it knows to ask the other ranks."""

    def __init__(self, rank: int, state: Callable[[], dict[str, Any]]) -> None:
        self.rank = rank
        self.state = state
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("0.0.0.0", 0))
        self.me = {"host": socket.gethostname(), "port": self.sock.getsockname()[1],
                   "addrs": _host_addresses()}
        self.others: dict[int, dict[str, Any]] = {}
        threading.Thread(target=self._answer, name="hvdscale-peers", daemon=True).start()

    def _answer(self) -> None:
        while True:
            try:
                msg, sender = self.sock.recvfrom(256)
                if not msg.startswith(_ASK):
                    continue
                reply = {"rank": self.rank, "nonce": msg[len(_ASK):].decode(errors="replace"),
                         "state": self.state()}
                self.sock.sendto(json.dumps(reply).encode()[:_MAX_REPLY], sender)
            except Exception:  # one bad datagram must not end the answering
                time.sleep(0.01)

    def ask(self, timeout_s: float = 2.0) -> dict[int, dict[str, Any] | None]:
        """Every other rank's state, or None for a rank that did not answer in ``timeout_s``."""
        nonce = f"{os.getpid()}-{time.monotonic_ns()}"
        got: dict[int, dict[str, Any] | None] = {r: None for r in self.others}
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(timeout_s)  # not even a full send buffer may hold the asker up
            for info in self.others.values():
                for addr in info["addrs"]:
                    if addr.startswith("127.") and info["host"] != self.me["host"]:
                        continue  # another host's loopback is our own
                    try:
                        s.sendto(_ASK + nonce.encode(), (addr, info["port"]))
                    except OSError:
                        continue  # unreachable from here: another address may do
            end = time.monotonic() + timeout_s
            while any(v is None for v in got.values()) and (left := end - time.monotonic()) > 0:
                s.settimeout(left)
                try:
                    reply = json.loads(s.recv(_MAX_REPLY))
                except (OSError, ValueError):
                    continue
                if isinstance(reply, dict) and reply.get("nonce") == nonce \
                        and reply.get("rank") in got:
                    got[reply["rank"]] = reply.get("state")
        return got


_peers: Peers | None = None


def start_peers(rank: int, allgather: Callable[[Any], list[Any]],
                state: Callable[[], dict[str, Any]]) -> Peers:
    """Start answering, and learn every rank's address through ``allgather`` (a collective:
    every rank calls this once, at start-up)."""
    global _peers
    p = Peers(rank, state)
    everyone = allgather(p.me)  # hvd: once, at start-up
    p.others = {r: info for r, info in enumerate(everyone) if r != rank}
    _peers = p
    return p


def ask_peers(timeout_s: float = 2.0) -> dict[int, dict[str, Any] | None] | None:
    """Every other rank's state (None: no answer); None before ``start_peers``."""
    return _peers.ask(timeout_s) if _peers is not None else None


# What a rank in each kind of phase is doing, in a message (kinds: StepWatchdog.phase()).
_KIND_WORDS = {"compute": "busy in", "communicate": "waiting in",
               "overlapped": "computing and communicating (one call) in",
               "joined": "joined (out of batches) in"}


def _kind(state: dict[str, Any]) -> str:
    """The phase kind of an answer; answers without one say only whether they wait."""
    return str(state.get("kind") or ("communicate" if state.get("waiting") else "compute"))


def _doing(state: dict[str, Any]) -> str:
    what = _KIND_WORDS.get(_kind(state), "waiting in" if state.get("waiting") else "busy in")
    return f"{what} {state.get('phase', '?')} for {float(state.get('for_s', 0)):.0f}s"


def blame(where: str, answers: dict[int, dict[str, Any] | None],
          mine: tuple[int, dict[str, Any]] | None = None,
          timeout_s: float = 2.0, most: int = 8) -> str:
    """The clause of a message from a rank waiting in ``where`` (e.g. ``step 3``) that says whom
    it waits for, from the other ranks' ``answers`` (None: no answer) and its own ``mine``
    (rank, state). Named first: ranks that do not answer and ranks busy with their own work;
    when every rank waits, those waiting somewhere else, except joined ranks (out of batches
    by design: nobody waits for them). When the ranks left are inside the step's combined
    compute+communication call (DDP's backward, MWMS's graph call), the slow one cannot be
    told from those waiting for it, and the clause says so. "" when nothing can be said.
    """
    silent = [f"rank {r} (no answer within {timeout_s:g}s: stopped, frozen or gone)"
              for r, st in sorted(answers.items()) if st is None]
    busy = [f"rank {r} ({_doing(st)})" for r, st in sorted(answers.items())
            if st is not None and not st.get("waiting")]
    named = silent + busy
    if not named:
        named = [f"rank {r} ({_doing(st)})" for r, st in sorted(answers.items())
                 if st is not None and st.get("phase") != where and _kind(st) != "joined"]
    if named:
        if len(named) > most:
            named = [*named[:most], f"{len(named) - most} more"]
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
        mine = (p.rank, p.state()) if p is not None else None
    except Exception:  # the message must still be printed and the job ended
        return ""
    if not answers:
        return ""
    return blame(where, answers, mine, timeout_s, most)
