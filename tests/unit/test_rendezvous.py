"""Rank 0's rendezvous address and port (issue 29, findings 4 and 8): never an address every
host has (bridges), the interface the user or launcher names first, GLOO_SOCKET_IFNAME never a
shared bridge, and the port bound before it is published (real sockets)."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from hvdscale.core import rendezvous as rv

BRIDGES = [("virbr0", "192.168.122.1", "255.255.255.0"), ("docker0", "172.17.0.1", "255.255.0.0")]
"""On every host, listed first (psutil's order is the kernel's)."""


def host(eth0: str, mask: str = "255.255.255.0") -> list[rv.Address]:
    return [*BRIDGES, ("eth0", eth0, mask)]


def addrs(h: list[rv.Address]) -> list[str]:
    return [a for _, a, _ in h]


def test_bridge_every_host_has_is_never_chosen() -> None:
    a, b, c = host("10.0.1.5"), host("10.0.1.9"), host("10.0.1.12")
    assert rv._shared_address(a, [addrs(b), addrs(c)]) == "10.0.1.5"


def test_per_host_subnets_need_a_named_interface() -> None:
    """eth0 in a subnet of each host's own (routed): today's answer was virbr0's address,
    which every peer would reach on its own host. Unnamed: a clear error; named: eth0."""
    a, b = host("10.0.1.5"), host("10.0.2.7")
    with pytest.raises(RuntimeError, match="network-interfaces"):
        rv._shared_address(a, [addrs(b)])
    assert rv._shared_address(a, [addrs(b)], ("eth0",)) == "10.0.1.5"
    assert rv._shared_address(a, [addrs(b)], ("10.0.1.0/24",)) == "10.0.1.5"
    with pytest.raises(RuntimeError, match="no address of its own on docker0"):
        rv._shared_address(a, [addrs(b)], ("docker0",))


def test_named_interface_wins_over_another_shared_subnet() -> None:
    a = [("eth0", "10.0.0.1", "255.255.255.0"), ("ib0", "192.168.7.1", "255.255.255.0")]
    b = ["10.0.0.2", "192.168.7.2"]
    assert rv._shared_address(a, [b]) == "10.0.0.1"
    assert rv._shared_address(a, [b], ("ib0",)) == "192.168.7.1"


def test_gloo_interface_is_never_a_bridge() -> None:
    b = host("10.0.1.9")
    assert rv._interface_toward("10.0.1.5", b, ()) == "eth0"
    # Routed (no subnet of b holds rank 0's address): the named interface, else none at all.
    routed = host("10.0.2.7")
    assert rv._interface_toward("10.0.1.5", routed, ("eth0",)) == "eth0"
    assert rv._interface_toward("10.0.1.5", routed, ()) is None
    # Rank 0's own host: the interface holding the address.
    assert rv._interface_toward("10.0.1.5", host("10.0.1.5"), ()) == "eth0"


@pytest.mark.parametrize(("env", "named"), [
    ({}, ()),
    ({"OMPI_MCA_btl_tcp_if_include": "hvd0"}, ("hvd0",)),  # mpirun --mca / horovodrun --mpi
    ({"HOROVOD_GLOO_IFACE": "hvd0"}, ("hvd0",)),  # horovodrun --gloo --network-interfaces
    ({"NCCL_SOCKET_IFNAME": "=eth1,eth2"}, ("eth1", "eth2")),
    ({"NCCL_SOCKET_IFNAME": "^docker0,lo"}, ()),  # an exclusion list names nothing
    ({"GLOO_SOCKET_IFNAME": "ib0", "NCCL_SOCKET_IFNAME": "eth0"}, ("ib0",)),
    ({"OMPI_MCA_btl_tcp_if_include": "10.0.1.0/24"}, ("10.0.1.0/24",)),
])
def test_named_interfaces(env: dict[str, str], named: tuple[str, ...]) -> None:
    assert rv.named_interfaces(env) == named


class OneRank:
    """The world of a one-rank job: its collectives return what this rank gives."""

    rank, size = 0, 1

    def allgather(self, x: Any) -> list[Any]:
        return [x]

    def bcast(self, x: Any, root: int = 0) -> Any:
        return x


def test_port_is_bound_before_it_is_published(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.delenv("MASTER_PORT", raising=False)
    servers: list[socket.socket] = []

    def listen(addr: str, port: int) -> int:
        s = socket.create_server(("", port))
        servers.append(s)
        return s.getsockname()[1]

    try:
        got = rv.agree(OneRank(), listen)
        assert got.addr == "127.0.0.1" and got.port == servers[0].getsockname()[1]
        # Listening already: a peer can connect as soon as it learns the port.
        socket.create_connection((got.addr, got.port), timeout=5).close()
    finally:
        for s in servers:
            s.close()


def test_a_taken_master_port_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.create_server(("", 0)) as other_job:
        port = other_job.getsockname()[1]
        monkeypatch.setenv("MASTER_PORT", str(port))
        monkeypatch.delenv("MASTER_ADDR", raising=False)
        with pytest.raises(RuntimeError, match=f"could not listen on port {port}: .*in use"):
            rv.agree(OneRank(), lambda a, p: socket.create_server(("", p)).getsockname()[1])


# --- issue 39: what the mutation run found untried --------------------------------------------

M24 = "255.255.255.0"


@pytest.fixture
def unnamed(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in rv.NAMING_VARS:
        monkeypatch.delenv(var, raising=False)


def test_each_refusal_reads_in_full(unnamed: None) -> None:
    a, b = host("10.0.1.5"), host("10.0.2.7")
    with pytest.raises(RuntimeError) as e:
        rv._shared_address(a, [addrs(b)], ("docker0", "ib0"))
    assert str(e.value) == ("rank 0 has no address of its own on docker0, ib0 (named by "
                            "GLOO_SOCKET_IFNAME); name an interface rank 0's host has")
    with pytest.raises(RuntimeError) as e:
        rv._shared_address(a, [addrs(b)])
    assert str(e.value) == (
        "no address of rank 0 that is its own shares a subnet with every other host (addresses "
        "every host has, such as docker0's, are skipped); name the job's interface (hvdscale "
        "sweep --network-interfaces, GLOO_SOCKET_IFNAME) or set MASTER_ADDR")


def test_a_named_subnet_with_host_bits_and_a_bad_name_before_a_good_one() -> None:
    a, b = host("10.0.1.5"), host("10.0.2.7")
    assert rv._shared_address(a, [addrs(b)], ("10.0.1.5/24",)) == "10.0.1.5"
    assert rv._shared_address(a, [addrs(b)], ("10.0.1.0/99", "eth0")) == "10.0.1.5"
    assert rv.named_interfaces({"NCCL_SOCKET_IFNAME": "=X1"}) == ("X1",)  # names are any text


def test_of_named_interfaces_the_one_joining_every_host_wins() -> None:
    a = [("eth0", "10.0.1.5", M24), ("ib0", "192.168.7.1", M24)]
    assert rv._shared_address(a, [["10.0.2.7", "192.168.7.2"]], ("eth0", "ib0")) == "192.168.7.1"


def test_the_interface_toward_rank_0_holding_it_then_named_first() -> None:
    own = [("eth1", "10.0.1.6", M24), ("eth0", "10.0.1.5", M24)]
    assert rv._interface_toward("10.0.1.5", own, ()) == "eth0"  # holds it: eth1 only joins it
    two = [("eth1", "10.0.1.6", M24), ("eth0", "10.0.1.7", M24)]
    assert rv._interface_toward("10.0.1.5", two, ("eth0",)) == "eth0"
    assert rv._interface_toward("10.0.1.5", two, ("eth1",)) == "eth1"


def test_rank_0s_plan_and_its_errors() -> None:
    calls: list[tuple[str, int]] = []

    def listen(addr: str, port: int) -> int:
        calls.append((addr, port))
        return 4321

    assert rv._rank0_plan([], (), None, None, listen) == ("127.0.0.1", 4321, "")
    assert calls == [("127.0.0.1", 0)]  # 0: any free port
    assert rv._rank0_plan([], (), None, "65536", listen) == (
        "", 0, "rank 0's store could not listen on port 65536: MASTER_PORT=65536 is not a TCP "
        "port")
    assert rv._rank0_plan([], (), None, "65535", listen) == ("127.0.0.1", 4321, "")

    def refuse(addr: str, port: int) -> int:
        raise OSError("no")

    assert rv._rank0_plan([], (), None, None, refuse) == (
        "", 0, "rank 0's store could not listen on port any: no")
    plan = rv._rank0_plan([["203.0.113.9"]], ("no-such-if0",), None, None, listen)
    assert plan[:2] == ("", 0) and plan[2].startswith("rank 0 has no address of its own on "
                                                      "no-such-if0"), plan


def test_job_addresses_per_rank_from_rank_0s_host_on() -> None:
    a = host("10.0.1.5")
    b = [*BRIDGES, ("eth0", "10.0.1.9", M24), ("eth0", "10.0.1.10", M24)]  # two on eth0
    ranks = [("a", a, ()), ("b", b, ()), ("a", a, ())]
    assert rv.job_addresses(ranks) == ["10.0.1.5", "10.0.1.9", "10.0.1.5"]
    assert rv.job_addresses([("b", b, ()), ("a", a, ())]) == ["10.0.1.9", "10.0.1.5"]
    assert rv.job_addresses([("a", a, ()), ("a", a, ())]) is None  # one host
    routed = host("10.0.2.7")
    assert rv.job_addresses([("a", a, ()), ("c", routed, ())]) is None  # no shared subnet
    # Rank 0's own naming decides (as in agree()), not another rank's.
    assert rv.job_addresses([("a", a, ("eth0",)), ("c", routed, ())]) == ["10.0.1.5", "10.0.2.7"]
    lone = [("eth9", "10.0.1.9", "255.255.255.255")]  # no subnet of its own holds rank 0's
    assert rv.job_addresses([("a", a, ()), ("d", lone, ())]) is None
