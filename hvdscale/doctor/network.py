"""Network interfaces per host, the ones all hosts have in common, the one rendezvous picks,
and the bandwidth its link class should give (what ``--bench`` compares against)."""

from __future__ import annotations

from typing import Any

from hvdscale.doctor.lines import FAIL, OK, WARN, Line

# Rough floors for a short allreduce's bus bandwidth between ranks of one host (shared memory:
# memory-bound, several GB/s on any current server; 1 GB/s below that means something is off).
SHARED_MEMORY_GBPS = 1.0
# A TCP allreduce reaches about this share of the wire's rate when nothing else is wrong.
LINK_EFFICIENCY = 0.5


def interface_facts() -> dict[str, Any]:
    """This host's IPv4 addresses (rendezvous's own reading) and each interface's state."""
    import psutil

    from hvdscale.core.rendezvous import _addresses

    stats = {name: {"up": bool(s.isup), "speed": int(s.speed)}
             for name, s in psutil.net_if_stats().items()}
    return {"addresses": [list(a) for a in _addresses()], "stats": stats}


def rendezvous_choice(hosts: list[dict[str, Any]]) -> tuple[str, str]:
    """(address, interface) of the first host that the framework rendezvous would pick to
    reach every other host; the one place the doctor asks ``hvdscale.core.rendezvous``.

    Args:
        hosts: each host's ``interface_facts()``, the first host first (rank 0's).

    Raises:
        RuntimeError: no subnet of the first host's reaches every other host.
    """
    # Kept behind this one call: rendezvous's choice may change (e.g. skip bridges every
    # host has), and the doctor must report whatever the runs will use.
    import os

    from hvdscale.core.rendezvous import _shared_address, named_interfaces

    own = [tuple(a) for a in hosts[0]["addresses"]]
    others = [[a[1] for a in h["addresses"]] for h in hosts[1:]]
    # The interface the user or launcher named wins there, so it does here.
    addr = _shared_address(own, others, named_interfaces(os.environ))  # type: ignore[arg-type]
    return addr, next(a[0] for a in own if a[1] == addr)


def _describe(net: dict[str, Any]) -> str:
    parts = []
    for ifname, addr, _mask in net["addresses"]:
        speed = net["stats"].get(ifname, {}).get("speed", 0)
        parts.append(f"{ifname} {addr}" + (f" ({speed} Mb/s)" if speed else ""))
    return ", ".join(parts) or "loopback only"


def check_interfaces(net: dict[str, Any], n_hosts: int) -> Line:
    """This host's IPv4 interfaces (loopback aside); none is only fine for one host."""
    if not net["addresses"] and n_hosts > 1:
        return Line("interfaces", FAIL, "loopback only, but the job spans several hosts",
                    "give each host an address on a shared network")
    return Line("interfaces", OK, _describe(net))


def common_names(hosts: list[dict[str, Any]]) -> list[str]:
    """Interface names with an IPv4 address on every host (horovodrun needs one such name)."""
    names = [{a[0] for a in h["addresses"]} for h in hosts]
    first = [a[0] for a in hosts[0]["addresses"]]
    return sorted(set(first).intersection(*names), key=first.index) if names else []


def check_common(hosts: list[dict[str, Any]], planned_hosts: int) -> Line:
    """The network every host shares: the interface gloo and the rendezvous will use.

    Args:
        hosts: ``interface_facts()`` of each host the doctor ran on, rank 0's first.
        planned_hosts: hosts the planned job spans (may exceed those compared).
    """
    if len(hosts) <= 1 and planned_hosts <= 1:
        return Line("network", OK, "one host: loopback for gloo, shared memory for MPI")
    if len(hosts) < planned_hosts:
        return Line("network", WARN, f"{planned_hosts} hosts planned, only this one seen",
                    "run the doctor under the job's launcher to compare every host")
    try:
        addr, ifname = rendezvous_choice(hosts)
    except RuntimeError:
        return Line("network", FAIL, "no subnet joins the first host to every other host",
                    "set MASTER_ADDR and GLOO_SOCKET_IFNAME, or join the hosts' networks")
    common = common_names(hosts)
    value = f"{ifname} ({addr}) chosen; names on every host: {', '.join(common) or 'none'}"
    if ifname not in common:
        return Line("network", WARN, value,
                    "horovodrun needs one interface name on every host: "
                    "--network-interfaces NAME (rename the interfaces)")
    return Line("network", OK, value)


def link_class(hosts: list[dict[str, Any]]) -> tuple[str, float | None]:
    """The link a job across ``hosts`` uses and the bus bandwidth (GB/s) it should reach:
    shared memory on one host; else the chosen interface's speed (None when it reports none,
    as virtual links do)."""
    if len(hosts) <= 1:
        return "shared memory (one host)", SHARED_MEMORY_GBPS
    try:
        _, ifname = rendezvous_choice(hosts)
    except RuntimeError:
        return "no shared network", None
    speeds = [h["stats"].get(ifname, {}).get("speed", 0) for h in hosts]
    speed = min(speeds)
    if speed <= 0:
        return f"{ifname} (speed unknown)", None
    label = f"{speed / 1000:g} GbE" if speed >= 1000 else f"{speed} Mb/s Ethernet"
    return f"{ifname} {label}", speed * 1e6 / 8 / 1e9 * LINK_EFFICIENCY
