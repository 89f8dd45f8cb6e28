"""The ranks' side channel (hvdscale.core.peers): a waiting rank names the rank it waits for,
and asking never hangs on a rank that cannot answer. Real UDP sockets on this host."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from hvdscale.core import peers
from hvdscale.study.sweep.launcher import error_summary
from tests.peer_ranks import start_ranks, stop_ranks, take_endpoint


def _state(phase: str, waiting: bool, for_s: float = 7.0) -> dict[str, Any]:
    return {"phase": phase, "step": None, "for_s": for_s, "waiting": waiting,
            "kind": "communicate" if waiting else "compute"}


@pytest.fixture
def ranks() -> dict[int, peers.Peers]:
    """Four ranks in this process; rank 0 asks. Rank 3's answering address is a bound socket
    that never answers (a stopped or frozen rank)."""
    states = {0: _state("step 3", True), 1: _state("step 3", False, 24.0),
              2: _state("step 3", True), 3: _state("step 3", True)}
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent.bind(("127.0.0.1", 0))
    ps = start_ranks({r: lambda r=r: states[r] for r in states}, take_endpoint(3, silent))
    ps[0].states = states  # type: ignore[attr-defined]
    yield ps
    stop_ranks(ps)
    silent.close()


def test_ask_returns_each_answer_and_none_for_a_silent_rank(ranks: dict) -> None:
    got = ranks[0].ask(timeout_s=0.5)
    assert got == {1: _state("step 3", False, 24.0), 2: _state("step 3", True), 3: None}


def test_the_waiting_rank_names_the_busy_and_the_silent_rank(ranks: dict) -> None:
    named = peers.waiting_for("step 3", timeout_s=0.5)
    # The busy rank first (the slow one), then the silent one.
    assert named == ("it waits for rank 1 (busy in step 3 for 24s), "
                     "rank 3 (no answer within 0.5s: stopped, frozen or gone)")
    # Rank 2 waits where rank 0 does: it is not the one rank 0 waits for.
    assert "rank 2" not in named


def test_when_every_rank_waits_the_one_waiting_elsewhere_is_named(ranks: dict) -> None:
    ranks[0].others.pop(3)
    ranks[0].states[1] = _state("step 2", True, 30.0)
    assert peers.waiting_for("step 3", timeout_s=0.5) == \
        "it waits for rank 1 (waiting in step 2 for 30s)"
    ranks[0].states[1] = _state("step 3", True)
    assert peers.waiting_for("step 3", timeout_s=0.5) == ""  # nobody to blame: the old text


def test_no_side_channel_names_no_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peers, "_peers", None)
    assert peers.waiting_for("step 3") == ""


def test_error_summary_names_the_node_open_mpi_lost() -> None:
    # What mpirun (under SLURM, and under horovodrun) printed on the two-node test cluster when
    # the second node died: the last lines name the node only as an MPI peer's host.
    stderr = ("ORTE has lost communication with a remote daemon.\n"
              "  HNP daemon   : [[26175,0],0] on node node-a\n"
              "  Remote daemon: [[26175,0],1] on node node-b\n"
              "This is usually due to either a failure of the TCP network\n"
              "An MPI communication peer process has unexpectedly disconnected.  This\n"
              "  Local host: node-a\n  Local PID:  25044\n  Peer host:  node-b\n")
    assert error_summary(stderr) == ("lost node node-b: Open MPI lost contact with its daemon "
                                     "there (the node died or its network failed)")


def test_a_rank_answers_its_run_phase_or_its_step() -> None:
    from hvdscale.core import supervise

    supervise.phase("data")
    assert supervise.current_state()["phase"] == "phase 'data'"
    assert supervise.current_state()["waiting"] is False
    where = ["compute"]
    dog = supervise.StepWatchdog(0.0, 0, lambda: where[0])  # 0: no watch thread
    supervise.phase("training steps")
    dog.start_step(3)
    assert supervise.current_state()["phase"] == "step 3"
    assert supervise.current_state()["waiting"] is False
    where[0] = "communicate"
    assert supervise.current_state()["waiting"] is True
    dog.end_step()  # between steps: the run phase again
    assert supervise.current_state()["phase"] == "phase 'training steps'"
    dog.stop()
    supervise.phase("gather of the ranks' timings", waiting=True)
    assert supervise.current_state()["waiting"] is True


def test_the_channel_binds_loopback_on_one_host_and_never_a_shared_bridge() -> None:
    from hvdscale.core.peers_addr import bind_address

    one_host = [{"host": "a", "addrs": ["10.0.0.1", "172.17.0.1"]}] * 3
    assert bind_address(1, one_host) == "127.0.0.1"
    # docker0's 172.17.0.1 is on both hosts (listed first here): it reaches no other host.
    two = [{"host": "a", "addrs": ["172.17.0.1", "10.9.0.1"]},
           {"host": "b", "addrs": ["172.17.0.1", "10.9.0.2"]}]
    assert bind_address(0, two) == "10.9.0.1"
    assert bind_address(1, two) == "10.9.0.2"


# --- issue 39: what the mutation run of peers_addr found untried -------------------------------

def _routed() -> tuple[str, str]:
    """(address, interface) this host's routing sends from toward another host (no packet)."""
    import psutil

    from hvdscale.core.peers_addr import _route_source

    src = _route_source("192.0.2.77")  # TEST-NET-1: any routed destination will do
    if src is None or src.startswith("127."):
        pytest.skip("this host routes nowhere but loopback")
    name = next(n for n, es in psutil.net_if_addrs().items() if any(e.address == src for e in es))
    return src, name


def test_only_a_string_of_one_ipv4_address_is_valid() -> None:
    from hvdscale.core.peers_addr import valid_ipv4

    assert valid_ipv4("10.0.0.1")
    for bad in ("::1", "10.0.0", "x", None, 167772161):  # the last: 10.0.0.1 as an integer
        assert not valid_ipv4(bad), bad


def test_the_named_interfaces_address_is_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    from hvdscale.core.peers_addr import _IFACE_ENVS, bind_address

    mine, ifname = _routed()
    for env in _IFACE_ENVS:
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", ifname)
    # Toward 127.0.0.2 the route leaves from loopback, in no offer: unnamed, the first own one.
    offers = [{"host": "a", "addrs": ["10.9.0.1", mine]}, {"host": "b", "addrs": ["127.0.0.2"]}]
    assert bind_address(0, offers) == mine
    monkeypatch.delenv("GLOO_SOCKET_IFNAME")
    assert bind_address(0, offers) == "10.9.0.1"


def test_the_address_routed_toward_another_host_is_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 0's own addresses are never a destination: 127.0.0.1 (in its offer here) would
    route from itself; 10.9.0.2, on the other host, routes from this host's address."""
    from hvdscale.core.peers_addr import _IFACE_ENVS, bind_address

    mine, _ = _routed()
    for env in _IFACE_ENVS:
        monkeypatch.delenv(env, raising=False)
    offers = [{"host": "a", "addrs": ["127.0.0.1", mine]}, {"host": "b", "addrs": ["10.9.0.2"]},
              {"host": "a", "addrs": ["127.0.0.1", mine]}]
    assert bind_address(0, offers) == mine
    assert bind_address(2, offers) == mine
