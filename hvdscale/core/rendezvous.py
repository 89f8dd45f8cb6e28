"""Where a framework's own collective library meets: an address of rank 0 and a free port,
agreed over the harness's MPI world, so the user never sets MASTER_ADDR/MASTER_PORT.

Every rank sends its hostname and IPv4 addresses to all; rank 0 picks a free TCP port and,
with several hosts (SLURM nodes, network-namespace hosts), its own address in a subnet every
other host has an address in (one host: loopback), and broadcasts both. Each rank names its
interface in that subnet for gloo (``GLOO_SOCKET_IFNAME``, unless the user set one), since gloo
otherwise resolves the hostname, which such hosts may not map. A user-set ``MASTER_ADDR`` /
``MASTER_PORT`` wins.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from hvdscale.core.world import World, hostname


@dataclass(frozen=True)
class Rendezvous:
    """What this rank uses to reach rank 0's store."""

    addr: str
    port: int
    ifname: str | None
    """The local interface that reaches ``addr`` (None: loopback or left to the library)."""
    source: str
    """``user`` (MASTER_ADDR/MASTER_PORT set) or ``agreed`` (broadcast from rank 0)."""


def free_port() -> int:
    """A TCP port free on this host now (the OS picks it; the socket is closed again)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _addresses() -> list[tuple[str, str, str]]:
    """(interface, IPv4 address, netmask) of this host, loopback excluded."""
    import psutil

    out = []
    for ifname, addrs in psutil.net_if_addrs().items():
        for a in addrs:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                out.append((ifname, a.address, a.netmask or "255.255.255.255"))
    return out


def _subnet_if(addr: str) -> str | None:
    """This host's interface whose subnet holds ``addr`` (None: no such interface)."""
    for ifname, mine, mask in _addresses():
        if ipaddress.ip_address(addr) in ipaddress.ip_network(f"{mine}/{mask}", strict=False):
            return ifname
    return None


def _shared_address(own: list[tuple[str, str, str]], others: list[list[str]]) -> str:
    """Rank 0's address in a subnet that every other host has an address in."""
    for _, addr, mask in own:
        net = ipaddress.ip_network(f"{addr}/{mask}", strict=False)
        if all(any(ipaddress.ip_address(a) in net for a in host) for host in others):
            return addr
    raise RuntimeError("no address of rank 0 shares a subnet with every other host; set "
                       "MASTER_ADDR (and GLOO_SOCKET_IFNAME) for torch.distributed")


def agree(world: World) -> Rendezvous:
    """Agree rank 0's address and a free port over ``world`` (every rank calls this).

    Raises:
        RuntimeError: several hosts and no subnet that joins rank 0 to all of them.
    """
    # hvd: one allgather and one broadcast, before the framework's process group exists
    hosts = world.allgather((hostname(), [a for _, a, _ in _addresses()]))  # hvd:
    names = {h for h, _ in hosts}
    plan = None
    if world.rank == 0:
        others = [addrs for h, addrs in hosts if h != hosts[0][0]]
        try:
            addr = _shared_address(_addresses(), others) if others else "127.0.0.1"
            plan = (addr, free_port(), "")
        except RuntimeError as e:  # every rank raises it, none waits
            plan = ("", 0, str(e))
    addr, port, err = world.bcast(plan, root=0)  # hvd:
    user_addr, user_port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    port = int(user_port) if user_port else port
    if user_addr:
        return Rendezvous(user_addr, port, None, "user")
    if err:
        raise RuntimeError(err)
    ifname = _loopback_if() if len(names) == 1 else _subnet_if(addr)
    return Rendezvous(addr, port, ifname, "agreed")


def _loopback_if() -> str | None:
    """The loopback interface's name (gloo must use it when every rank is on one host)."""
    import psutil

    for ifname, addrs in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address.startswith("127.") for a in addrs):
            return ifname
    return None


@contextmanager
def interface(rv: Rendezvous) -> Iterator[None]:
    """``GLOO_SOCKET_IFNAME`` set to ``rv``'s interface while process groups are made (a
    user-set value wins); the environment is left as it was, so a later run agrees afresh."""
    before = os.environ.get("GLOO_SOCKET_IFNAME")
    if rv.ifname and before is None:
        os.environ["GLOO_SOCKET_IFNAME"] = rv.ifname
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("GLOO_SOCKET_IFNAME", None)


def init_method(rv: Rendezvous) -> str:
    """The ``tcp://`` URL of rank 0's store."""
    return f"tcp://{rv.addr}:{rv.port}"
