"""Which address the side channel (hvdscale.core.peers) binds: the interface the ranks talk
over, never every interface.

All ranks on one host: loopback. Across hosts: the address of the interface the user or the
launcher named (``--network-interfaces`` reaches the ranks as ``NCCL_SOCKET_IFNAME`` and Open
MPI's ``btl_tcp_if_include``; ``HOROVOD_GLOO_IFACE``, ``GLOO_SOCKET_IFNAME``), else the address
this host's routing table uses to reach the other hosts. Addresses that more than one host has
(bridges such as docker0's 172.17.0.1, on every host) reach no other host and are skipped.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from typing import Any

LOOPBACK = "127.0.0.1"
# Where launchers and users name the network interface the ranks talk over, in that order.
_IFACE_ENVS = ("HOROVOD_GLOO_IFACE", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME",
               "OMPI_MCA_btl_tcp_if_include")


def _interfaces() -> dict[str, list[str]]:
    """This host's non-loopback IPv4 addresses, by interface."""
    import psutil

    return {name: [e.address for e in entries if e.family == socket.AF_INET
                   and not e.address.startswith("127.")]
            for name, entries in psutil.net_if_addrs().items()}


def named_addresses() -> list[str]:
    """The IPv4 addresses of the first interface named in the environment that this host has
    (a list such as ``eth0,ib0``: the first one here; ``^lo`` excludes, names nothing)."""
    found = _interfaces()
    for env in _IFACE_ENVS:
        for name in os.environ.get(env, "").split(","):
            if found.get(name.strip()):
                return found[name.strip()]
    return []


def candidate_addresses() -> list[str]:
    """The addresses this host offers the others at start-up: the named interface's, else all
    of its non-loopback IPv4 addresses."""
    named = named_addresses()
    return named or [a for addrs in _interfaces().values() for a in addrs]


def _route_source(addr: str) -> str | None:
    """The local address this host's routing sends from to reach ``addr`` (no packet sent)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((addr, 9))
            return s.getsockname()[0]
    except OSError:
        return None


def valid_ipv4(addr: Any) -> bool:
    """True for a string holding one IPv4 address."""
    try:
        return isinstance(addr, str) and ipaddress.ip_address(addr).version == 4
    except ValueError:
        return False


def bind_address(rank: int, offers: list[dict[str, Any]]) -> str:
    """The address this rank binds, from every rank's start-up offer (``host``, ``addrs``)."""
    hosts = {o["host"] for o in offers}
    if len(hosts) == 1:
        return LOOPBACK
    where: dict[str, set[str]] = {}
    for o in offers:
        for a in o["addrs"]:
            where.setdefault(a, set()).add(o["host"])
    mine = [a for a in offers[rank]["addrs"] if len(where.get(a, ())) == 1]
    named = [a for a in named_addresses() if a in mine]
    if named:
        return named[0]
    me = offers[rank]["host"]
    for o in offers:
        if o["host"] == me:
            continue
        for a in o["addrs"]:
            src = _route_source(a) if len(where[a]) == 1 else None
            if src in mine:
                return src
    return mine[0] if mine else LOOPBACK
