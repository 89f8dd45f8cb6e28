"""A hostile sender on loopback, for the fault tests: it finds the UDP sockets of a running
job's ranks (as any local root user can, from /proc) and floods them with what an outsider can
send the side channel (hvdscale.core.peers): asks in the old and the new layout, unsigned or
signed with a wrong key, forged replies (the old channel's shape with ``"state": "x"``, the
new one with a bad signature), random bytes, and asks from source port 0. Bounded in count,
rate and time; it counts every answer it gets (a running job must give none)."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import threading
import time

import psutil

from hvdscale.core import peers_wire as wire


def _payloads() -> list[bytes]:
    nonce = os.urandom(wire.NONCE_LEN)
    forged = b"hvr1" + nonce + struct.pack("!IiBBdB", 1, 3, 0, 0, 1.0, 6) + b"step 3"
    return [b"hvdscale?" + b"\xff" * 40, b"hvq1" + bytes(wire.NONCE_LEN + wire.MAC_LEN),
            wire.make_ask(wire.new_key())[1],
            json.dumps({"rank": 1, "nonce": nonce.hex(), "state": "x"}).encode(),
            forged + bytes(wire.MAC_LEN), os.urandom(64)]


def _ranks_ports(marker: str) -> set[int]:
    """Loopback or wildcard UDP ports held by the processes whose command line holds
    ``marker`` (the launcher and the ranks of one test's job)."""
    pids = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    ports = set()
    for pid in pids:
        try:
            conns = psutil.Process(int(pid)).net_connections(kind="udp4")
        except (psutil.Error, ValueError):
            continue
        ports.update(c.laddr.port for c in conns if c.laddr.ip in ("127.0.0.1", "0.0.0.0"))
    return ports


class HostileSender:
    """Floods the job marked ``marker`` from a thread, at most ``most`` datagrams at about
    ``rate`` a second for at most ``within_s`` seconds; use as a context manager."""

    def __init__(self, marker: str, most: int = 20000, rate: float = 400.0,
                 within_s: float = 120.0) -> None:
        self.marker, self.most, self.rate, self.within_s = marker, most, rate, within_s
        self.sent = self.port0 = self.answers = 0
        self.ports: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> HostileSender:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP) \
            if os.geteuid() == 0 else None
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", 0))
            s.setblocking(False)
            end, looked = time.monotonic() + self.within_s, 0.0
            while not self._stop.is_set() and time.monotonic() < end and self.sent < self.most:
                if time.monotonic() - looked > 1.0:  # ports of ranks started meanwhile
                    self.ports |= _ranks_ports(self.marker)
                    looked = time.monotonic()
                if not self.ports:
                    time.sleep(0.2)
                    continue
                for port in sorted(self.ports):
                    for msg in _payloads():
                        self._send(s, raw, msg, port)
                self._count_answers(s)
                time.sleep(len(self.ports) * 7 / self.rate)
        if raw is not None:
            raw.close()

    def _send(self, s: socket.socket, raw: socket.socket | None, msg: bytes, port: int) -> None:
        try:
            s.sendto(msg, ("127.0.0.1", port))
            self.sent += 1
            if raw is not None and msg.startswith((b"hvq1", b"hvdscale?")):
                raw.sendto(struct.pack("!HHHH", 0, port, 8 + len(msg), 0) + msg,
                           ("127.0.0.1", port))
                self.sent += 1
                self.port0 += 1
        except OSError:
            pass  # a port closed as the job ended

    def _count_answers(self, s: socket.socket) -> None:
        while True:
            try:
                s.recv(4096)
            except OSError:
                return
            self.answers += 1
