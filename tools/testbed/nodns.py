"""A machine without network, made on this one: a command run in its own network, UTS and mount
namespaces, where a name lookup waits for a name server that never answers.

Inside: loopback up; a veth pair whose first end holds 10.77.0.2/24 and a default route via
10.77.0.1, that gateway's link address fixed (a permanent neighbour entry), so every packet
leaves by the veth and is dropped at its other end, unanswered (no ARP failure, no "network
unreachable" that would make a lookup fail at once); /etc/resolv.conf replaced (a bind mount,
seen only inside) by one naming a server behind that route with a long timeout; a hostname that
/etc/hosts does not list. A lookup of any name outside /etc/hosts (``socket.getfqdn()``, a
reverse lookup of an address) then waits ``LOOKUP_S`` seconds before failing, as on a cluster
node or a lent GPU machine whose name server cannot be reached; and each query sent shows in
the interface's packet count (``TX``). Nothing outside changes.
Needs root (``unshare``) and ``ip``; used by tests/integration/test_nodns.py and
bench/bench_startup.py.
"""

from __future__ import annotations

import shlex
from pathlib import Path

TIMEOUT_S, ATTEMPTS = 30, 5
"""resolv.conf's options, glibc's maxima."""
LOOKUP_S = 15
"""The least one lookup of an unlisted name waits there before failing: 3 s per attempt
measured on this (gVisor) machine whatever the timeout asks, 30 s per attempt elsewhere."""
TX = "ip -s -o link show nd0"
"""Prints the interface's counters: packets sent (``tx_packets`` reads them) are lookups
tried, since nothing else leaves (IPv6 is off on it, so no router solicitations)."""
HOSTNAME = "hvdscale-nodns"


def nodns_argv(tmp: Path, command: str) -> list[str]:
    """``command`` (a shell line) run on the simulated machine; ``tmp`` holds its
    resolv.conf."""
    resolv = Path(tmp) / "resolv.conf"
    resolv.write_text(f"nameserver 10.77.0.53\noptions timeout:{TIMEOUT_S} attempts:{ATTEMPTS}\n")
    setup = " && ".join([
        f"mount --bind {shlex.quote(str(resolv))} /etc/resolv.conf",
        f"hostname {HOSTNAME}",
        "ip link set lo up",
        "ip link add nd0 type veth peer name nd1",
        "echo 1 > /proc/sys/net/ipv6/conf/nd0/disable_ipv6",
        "ip addr add 10.77.0.2/24 dev nd0",
        "ip link set nd0 up", "ip link set nd1 up",
        "ip neigh add 10.77.0.1 lladdr 02:00:00:00:00:01 dev nd0 nud permanent",
        "ip route add default via 10.77.0.1 dev nd0",
    ])
    return ["unshare", "--net", "--uts", "--mount", "--propagation", "private",
            "sh", "-c", f"{setup} && {command}"]


def tx_packets(line: str) -> int:
    """Packets sent, from one line of ``TX``'s output (``... TX: bytes packets ... \\ B P ...``)."""
    return int(line.split("TX:")[1].split("\\")[1].split()[1])
