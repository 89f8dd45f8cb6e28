"""The shaped link of tools/testbed (shaping.py, link.py): two namespace hosts, one rank each,
Open MPI over TCP on their veth pair only, the pair limited with tbf to 0.5 Gbit/s. One short
commbench ping-pong across it must run within 10 % of the set rate, and below what the same
link carries unshaped: a tc call that silently did nothing fails here.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.system_deps import ensure_system_deps
from tools.testbed import link, shaping
from tools.testbed.netns import TwoHosts

RATE = 0.5  # Gbit/s: well below what the unshaped veth carries on 2 busy cores (~5 Gbit/s)
SIZE = 16 << 20  # 0.27 s a message at RATE: tbf's 4 ms burst biases it by under 2 %

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoHosts]:
    ensure_system_deps("sshd", "ssh-keygen", "ip", "unshare")
    if os.geteuid() != 0:
        pytest.skip("network namespaces and tc need root")
    if shutil.which("tc") is None:
        pytest.skip("tc (iproute2) is not installed: the link cannot be shaped")
    tmp = tmp_path_factory.mktemp("shaped-link")
    with link.ssh_hosts(tmp, str(os.getpid() % 10000), prefix="hvsl") as h:
        yield h


def _p2p_gbit(h: TwoHosts, out: Path) -> tuple[float, list[int]]:
    """One ping-pong commbench across the hosts: the link's rate (its fastest repeat: the CI
    host's other work can slow a repeat, not speed it past the link) and tc's bytes each way."""
    before = shaping.sent_bytes(h.ns)
    res = link.commbench(h, out, "p2p", str(SIZE), repeats=5, warmup=1)
    link.transports_in_force(res, h.names)  # one rank a host, TCP over hvd0 only
    sent = [a - b for a, b in zip(shaping.sent_bytes(h.ns), before, strict=True)]
    return link.best_link_gbit(res, "p2p")[SIZE], sent


def test_the_shaped_link_runs_at_its_set_rate(hosts: TwoHosts, tmp_path: Path) -> None:
    shaping.unshape(hosts.ns)
    unshaped, _ = _p2p_gbit(hosts, tmp_path / "unshaped")
    try:
        for q in shaping.shape(hosts.ns, RATE):
            assert q["kind"] == "tbf" and q["options"]["rate"] * 8 == RATE * 1e9, q
        shaped, sent = _p2p_gbit(hosts, tmp_path / "shaped")
    finally:
        shaping.unshape(hosts.ns)
    assert abs(shaped - RATE) <= 0.10 * RATE, (shaped, RATE, unshaped)
    assert shaped < 0.8 * unshaped, (shaped, unshaped)
    # 6 ping-pongs (1 untimed) of SIZE each way, through the qdisc of each end
    assert all(s >= 6 * SIZE for s in sent), sent
    assert shaping.qdisc(hosts.ns[0])["kind"] != "tbf"  # removed cleanly


def test_a_rate_that_is_not_positive_is_refused() -> None:
    for bad in (0, -1, "fast", float("nan")):
        with pytest.raises(ValueError, match="positive number of Gbit/s") as e:
            shaping.check_rate(bad)
        assert "\n" not in str(e.value)
