"""The doctor reports the interface the runs will use (issue 39): one the user or the launcher
names wins over the first shared subnet, as it does in hvdscale.core.rendezvous."""

from __future__ import annotations

from typing import Any

import pytest

from hvdscale.core.rendezvous import NAMING_VARS
from hvdscale.doctor import network
from hvdscale.doctor.lines import FAIL, OK, WARN, Line


def _host(last: int) -> dict[str, Any]:
    """A host on two shared subnets: eth0 (listed first) and ens6."""
    return {"addresses": [["eth0", f"10.0.0.{last}", "255.255.255.0"],
                          ["ens6", f"10.1.0.{last}", "255.255.255.0"]],
            "stats": {"eth0": {"up": True, "speed": 1000}, "ens6": {"up": True, "speed": 100000}}}


@pytest.fixture
def no_naming(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for var in NAMING_VARS:
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_without_a_name_the_first_shared_subnet_is_chosen(no_naming: pytest.MonkeyPatch) -> None:
    hosts = [_host(2), _host(3)]
    assert network.rendezvous_choice(hosts) == ("10.0.0.2", "eth0")
    assert network.link_class(hosts)[0] == "eth0 1 GbE"


@pytest.mark.parametrize("var", ["GLOO_SOCKET_IFNAME", "OMPI_MCA_btl_tcp_if_include"])
def test_the_named_interface_is_the_one_reported(no_naming: pytest.MonkeyPatch, var: str) -> None:
    no_naming.setenv(var, "ens6")
    hosts = [_host(2), _host(3)]
    assert network.rendezvous_choice(hosts) == ("10.1.0.2", "ens6")
    line = network.check_common(hosts, 2)
    assert line.status == OK and line.value.startswith("ens6 (10.1.0.2) chosen"), line
    assert not network.link_class(hosts)[0].startswith("eth0")


def test_a_named_interface_rank_0_lacks_fails(no_naming: pytest.MonkeyPatch) -> None:
    no_naming.setenv("GLOO_SOCKET_IFNAME", "ib0")
    assert network.check_common([_host(2), _host(3)], 2).status == FAIL


def test_common_names_keep_the_first_hosts_order(no_naming: pytest.MonkeyPatch) -> None:
    a, b = _host(2), _host(3)
    b["addresses"] = [b["addresses"][1], b["addresses"][0], ["ib0", "10.9.0.3", "255.255.255.0"]]
    assert network.common_names([a, b]) == ["eth0", "ens6"]
    assert network.common_names([a]) == ["eth0", "ens6"]


def test_one_host_and_its_boundaries(no_naming: pytest.MonkeyPatch) -> None:
    one = [_host(2)]
    assert network.check_common(one, 1).value.startswith("one host")
    assert network.check_common(one, 2).status != OK  # a second host planned, none seen
    two = [_host(2), _host(3)]
    assert network.check_common(two, 1).value.startswith("eth0 (10.0.0.2) chosen")
    lone = [_host(2), {"addresses": [["ib0", "10.9.0.3", "255.255.255.0"]], "stats": {}}]
    assert network.check_common(lone, 2).status == FAIL


def test_each_network_line_reads_in_full(no_naming: pytest.MonkeyPatch) -> None:
    # The line is what the user acts on: its check name, what was found and the fix, whole.
    one, two = [_host(2)], [_host(2), _host(3)]
    assert network.check_common(one, 1) == Line(
        "network", OK, "one host: loopback for gloo, shared memory for MPI")
    assert network.check_common(one, 3) == Line(
        "network", WARN, "3 hosts planned, only this one seen",
        "run the doctor under the job's launcher to compare every host")
    apart = [_host(2), {"addresses": [["ib0", "10.9.0.3", "255.255.255.0"]], "stats": {}}]
    assert network.check_common(apart, 2) == Line(
        "network", FAIL, "no subnet joins the first host to every other host",
        "set MASTER_ADDR and GLOO_SOCKET_IFNAME, or join the hosts' networks")
    assert network.check_common(two, 2) == Line(
        "network", OK, "eth0 (10.0.0.2) chosen; names on every host: eth0, ens6")
    renamed = [_host(2), {"addresses": [["enp1", "10.0.0.3", "255.255.255.0"]], "stats": {}}]
    assert network.check_common(renamed, 2) == Line(
        "network", WARN, "eth0 (10.0.0.2) chosen; names on every host: none",
        "horovodrun needs one interface name on every host: "
        "--network-interfaces NAME (rename the interfaces)")
