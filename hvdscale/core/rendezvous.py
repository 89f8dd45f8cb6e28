"""Where a framework's own collective library meets: an address of rank 0 and a port rank 0's
store already listens on, agreed over the harness's MPI world, so the user never sets
MASTER_ADDR/MASTER_PORT.

Every rank sends its hostname and its interfaces' IPv4 addresses to all. Rank 0 picks its own
address (one host: loopback): never one another host also has (bridges such as docker0's
172.17.0.1 or virbr0's 192.168.122.1 exist on every host, and a peer would connect to its own),
on the interface the user or the launcher names (``GLOO_SOCKET_IFNAME``,
``NCCL_SOCKET_IFNAME``, ``HOROVOD_GLOO_IFACE``, Open MPI's ``btl_tcp_if_include``: what
``horovodrun --network-interfaces`` and ``hvdscale sweep --network-interfaces`` set) when one
is named, and in a subnet every other host has an address in unless a named interface says
where to go. Rank 0 then binds its store (port 0: the OS picks; ``MASTER_PORT``: that one) and
only then broadcasts address and port, so no other process can take the port in between.
Each rank names its interface toward that address for gloo (``GLOO_SOCKET_IFNAME``, unless the
user set one), since gloo otherwise resolves the hostname, which such hosts may not map. A
user-set ``MASTER_ADDR`` wins.

A world whose launcher already runs a store every rank has joined (torchrun's: the world's
``rendezvous_store``) needs no agreement: its store, under a prefix of its own, is the
rendezvous, at torchrun's ``MASTER_ADDR``/``MASTER_PORT``.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hvdscale.core.world import World, hostname

Address = tuple[str, str, str]
"""(interface, IPv4 address, netmask)."""
NAMING_VARS = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "HOROVOD_GLOO_IFACE",
               "OMPI_MCA_btl_tcp_if_include")
"""Where the user or the launcher names the job's network interface, first set wins."""


@dataclass(frozen=True)
class Rendezvous:
    """What this rank uses to reach rank 0's store."""

    addr: str
    port: int
    ifname: str | None
    """The local interface that reaches ``addr`` (None: loopback or left to the library)."""
    source: str
    """``user`` (MASTER_ADDR set), ``agreed`` (chosen by rank 0 and broadcast) or ``launcher``
    (the launcher's store: ``store``)."""
    store: Any = None
    """The store every rank has joined already (a launcher's), or None: connect to ``addr``."""


def free_port() -> int:
    """A TCP port free on this host now (the OS picks it; the socket is closed again, so
    another process may take it before it is bound again: bind first where possible)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _addresses() -> list[Address]:
    """(interface, IPv4 address, netmask) of this host, loopback excluded."""
    import psutil

    out = []
    for ifname, addrs in psutil.net_if_addrs().items():
        for a in addrs:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                out.append((ifname, a.address, a.netmask or "255.255.255.255"))
    return out


def named_interfaces(env: dict[str, str] | os._Environ) -> tuple[str, ...]:
    """The interface names (or, from ``btl_tcp_if_include``, CIDR subnets) the job was told to
    use; empty when none is named (NCCL's ``^`` exclusion lists name none)."""
    for var in NAMING_VARS:
        value = env.get(var, "").strip()
        if value and not value.startswith("^"):
            return tuple(v.strip().lstrip("=") for v in value.split(",") if v.strip())
    return ()


def _is_named(a: Address, named: tuple[str, ...]) -> bool:
    """Whether address ``a`` lies on an interface (or in a subnet) of ``named``."""
    for n in named:
        if "/" in n:
            try:
                if ipaddress.ip_address(a[1]) in ipaddress.ip_network(n, strict=False):
                    return True
            except ValueError:
                continue
        elif a[0] == n:
            return True
    return False


def _joins(addr: str, mask: str, host: list[str]) -> bool:
    net = ipaddress.ip_network(f"{addr}/{mask}", strict=False)
    return any(ipaddress.ip_address(a) in net for a in host)


def _shared_address(own: list[Address], others: list[list[str]],
                    named: tuple[str, ...] = ()) -> str:
    """Rank 0's address for the store: not held by any other host; on a named interface when
    one is named (the user or launcher knows the routes), else in a subnet every other host
    has an address in."""
    taken = {a for host in others for a in host}
    mine = [a for a in own if a[1] not in taken]
    if named:
        on_named = [a for a in mine if _is_named(a, named)]
        if not on_named:
            raise RuntimeError(f"rank 0 has no address of its own on {', '.join(named)} (named "
                               f"by {_naming_var()}); name an interface rank 0's host has")
        joined = [a for a in on_named if all(_joins(a[1], a[2], h) for h in others)]
        return (joined or on_named)[0][1]
    for _, addr, mask in mine:
        if all(_joins(addr, mask, host) for host in others):
            return addr
    raise RuntimeError("no address of rank 0 that is its own shares a subnet with every other "
                       "host (addresses every host has, such as docker0's, are skipped); name "
                       "the job's interface (hvdscale sweep --network-interfaces, "
                       "GLOO_SOCKET_IFNAME) or set MASTER_ADDR")


def _naming_var() -> str:
    return next((v for v in NAMING_VARS if os.environ.get(v, "").strip()), NAMING_VARS[0])


def _interface_toward(addr: str, own: list[Address], named: tuple[str, ...]) -> str | None:
    """This host's interface toward ``addr``: one holding it (rank 0's host), else one whose
    subnet holds it, named ones first; else a named one (routed); None: none fits."""
    holding = [a for a in own if a[1] == addr]
    if holding:
        return holding[0][0]
    inside = [a for a in own if _joins(a[1], a[2], [addr])]
    inside.sort(key=lambda a: not _is_named(a, named))
    if inside:
        return inside[0][0]
    return next((a[0] for a in own if _is_named(a, named)), None)


def _rank0_plan(others: list[list[str]], named: tuple[str, ...], user_addr: str | None,
                user_port: str | None, listen: Callable[[str, int], int]) -> tuple:
    """(address, port, error): rank 0's choice, its store already listening (or the error
    every rank raises, so none waits)."""
    try:
        addr = user_addr or (_shared_address(_addresses(), others, named) if others
                             else "127.0.0.1")
    except RuntimeError as e:
        return "", 0, str(e)
    try:
        port = int(user_port or 0)
        if not 0 <= port < 65536:
            raise ValueError(f"MASTER_PORT={user_port} is not a TCP port")
        return addr, int(listen(addr, port)), ""
    except (RuntimeError, OSError, ValueError) as e:
        first = (str(e).splitlines() or [type(e).__name__])[0]
        return "", 0, f"rank 0's store could not listen on port {user_port or 'any'}: {first}"


def agree(world: World, listen: Callable[[str, int], int]) -> Rendezvous:
    """Agree rank 0's address and its store's port over ``world`` (every rank calls this).

    Args:
        world: the harness's MPI world.
        listen: called on rank 0 only with (address, port; 0: any) before anything is
            broadcast; binds rank 0's store and returns the port it listens on.

    Raises:
        RuntimeError: several hosts and no address of rank 0 they can all reach, or rank 0's
            store could not listen (the same error on every rank).
    """
    launcher_store = getattr(world, "rendezvous_store", None)  # a world of a test may lack it
    store = launcher_store("rendezvous") if launcher_store is not None else None
    if store is not None:  # the launcher's own store: nothing to agree
        return Rendezvous(os.environ.get("MASTER_ADDR", ""),
                          int(os.environ.get("MASTER_PORT", "0") or 0),
                          getattr(world, "ifname", None), "launcher", store)
    named = named_interfaces(os.environ)
    # hvd: one allgather and one broadcast, before the framework's process group exists
    hosts = world.allgather((hostname(), [a for _, a, _ in _addresses()]))  # hvd:
    names = {h for h, _ in hosts}
    user_addr, user_port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    plan = None
    if world.rank == 0:
        seen, others = {hosts[0][0]}, []
        for h, addrs in hosts:
            if h not in seen:
                seen.add(h)
                others.append(addrs)
        plan = _rank0_plan(others, named, user_addr, user_port, listen)
    addr, port, err = world.bcast(plan, root=0)  # hvd:
    if err:
        raise RuntimeError(err)
    if user_addr:
        return Rendezvous(addr, port, None, "user")
    ifname = _loopback_if() if len(names) == 1 else _interface_toward(addr, _addresses(), named)
    return Rendezvous(addr, port, ifname, "agreed")


def job_addresses(ranks: list[tuple[str, list[Address], tuple[str, ...]]]) -> list[str] | None:
    """Each rank's own address on the job's network, from every rank's (hostname, addresses,
    named interfaces), the same on every rank that computes it: rank 0's as :func:`agree`
    picks it, every other host's on its interface toward that one. None: one host, or some
    host has no such address (then the caller keeps host names)."""
    hosts = {h: own for h, own, _ in ranks}
    if len(hosts) == 1:
        return None
    h0, own0, named = ranks[0]
    others = [[a for _, a, _ in own] for h, own in hosts.items() if h != h0]
    try:
        addr0 = _shared_address(own0, others, named)
    except RuntimeError:
        return None
    per_host = {h0: addr0}
    for h, own in hosts.items():
        if h != h0:
            ifname = _interface_toward(addr0, own, named)
            mine = [a for i, a, _ in own if i == ifname]
            if not mine:
                return None
            per_host[h] = mine[0]
    return [per_host[h] for h, _, _ in ranks]


def addresses() -> list[Address]:
    """This host's IPv4 (interface, address, netmask), loopback excluded."""
    return _addresses()


def interface_toward(addr: str) -> str | None:
    """This host's interface toward ``addr`` (named interfaces first; None: none fits)."""
    return _interface_toward(addr, _addresses(), named_interfaces(os.environ))


def loopback_interface() -> str | None:
    """The loopback interface's name."""
    return _loopback_if()


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
