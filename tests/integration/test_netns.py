"""A 2-host sweep through ``horovodrun -hostfile``, the hosts made on this machine.

Two network namespaces joined by a veth pair are two hosts: each has its own address in a
private /24 on an interface named ``hvd0`` (horovodrun needs one name on every host), its own
hostname (a UTS namespace) and its own sshd bound to its address, with a host key and an
authorized key made for the test. The sweep runs inside the first namespace, where the ssh
client config is bind-mounted over /etc/ssh/ssh_config in a private mount namespace, so
nothing outside the test's namespaces changes. The fixture ends every process in both
namespaces and deletes them, even when the test fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.system_deps import ensure_system_deps
from tools.testbed.netns import (
    TwoHosts,
    remove_hosts,
    sh,
    ssh_keys,
    sshd_config,
    sshd_privsep,
    veth_hosts,
)

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--set", "measure.warmup_steps=1", "--set", "measure.steps=3",
        "--set", "data.synthetic.sentences_per_rank=64"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoHosts]:
    ensure_system_deps("sshd", "ssh-keygen", "ip", "unshare")
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    tmp = tmp_path_factory.mktemp("netns")
    h = TwoHosts(tmp, str(os.getpid() % 10000))
    # The namespaces (and sshd in them) end before sshd's privilege-separation dir goes.
    with sshd_privsep():
        try:
            veth_hosts(h.ns, h.veth, h.addr)
            assert ssh_keys(tmp, h.addr) == h.ssh_config
            for ns, addr, name in zip(h.ns, h.addr, h.names, strict=True):
                conf = tmp / f"sshd_{name}.conf"
                conf.write_text(sshd_config(tmp, addr, tmp / f"sshd_{name}.pid"))
                # Own UTS namespace around sshd: its sessions (the remote ranks) see this
                # hostname.
                sh("ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c",
                   f"hostname {name} && exec /usr/sbin/sshd -f {conf} "
                   f"-E {tmp / f'sshd_{name}.log'}")
            # Both hosts answer ssh with their own name before the sweep starts.
            for addr, name in zip(h.addr, h.names, strict=True):
                r = sh(*h.in_first(f"ssh {addr} hostname"), timeout=30)
                assert r.stdout.strip() == name, r
            yield h
        finally:
            remove_hosts(h.ns, h.veth)


def test_two_host_sweep_through_horovodrun_hostfile(hosts: TwoHosts, tmp_path: Path) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"# the two namespace hosts\n{hosts.addr[0]} slots=1\n"
                        f"{hosts.addr[1]} slots=1\n")
    out = tmp_path / "results"
    sweep = [sys.executable, "-m", "hvdscale", "sweep", str(ROOT / "configs/demo.yaml"),
             "--np", "2", "--strategies", "horovod,ps", "--launcher", "horovodrun",
             "--hostfile", str(hostfile), "--network-interfaces", "hvd0", "--out", str(out),
             "--timeout", "150", "--no-plot", *TINY]
    env = " ".join(f"{k}={v}" for k, v in {"OMPI_ALLOW_RUN_AS_ROOT": "1",
                                            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                                            "TF_CPP_MIN_LOG_LEVEL": "2"}.items())
    script = f"cd {ROOT} && env {env} " + " ".join(sweep)
    r = subprocess.run(hosts.in_first(script), capture_output=True, text=True, timeout=360)
    logs = "".join(f"\n== {f.name}\n{f.read_text()[-3000:]}"
                   for f in sorted((out / "logs").glob("*")) if (out / "logs").exists())
    assert r.returncode == 0, r.stdout + r.stderr + logs
    assert "[2/2] torch ps np=2: ok" in r.stdout
    recs = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [(x["key"]["strategy"], x["status"]) for x in recs] == [("horovod", "ok"),
                                                                   ("ps", "ok")]
    for rec in recs:
        # One rank on each host: the job really spanned both.
        assert rec["ranks"] == 2 and rec["rank_hosts"] == list(hosts.names), rec["rank_hosts"]
        # two hosts: the fabric transport is not left out (horovodrun's own ^openib stays)
        assert "ofi" not in (rec["threads"]["mpi_btl"] or ""), rec["threads"]["mpi_btl"]
        assert rec["words_per_s"] > 0
    (log,) = (out / "logs").glob("r1_np2_torch_*_1.stdout")  # both points, one launch
    launch = log.read_text().splitlines()[0]
    assert "horovodrun --mpi -np 2 -hostfile" in launch and "--network-interfaces hvd0" in launch


# Each rank starts the side channel over MPI's allgather and asks the other (hvdscale.core.peers).
ASK = """
import json, socket, sys
from mpi4py import MPI
from hvdscale.core.peers import start_peers
w = MPI.COMM_WORLD
st = {"phase": "step 1", "step": 1, "kind": "compute", "for_s": 1.0, "waiting": False}
p = start_peers(w.rank, w.allgather, lambda: st)
got = p.ask(timeout_s=5.0)
# One write per line: unbuffered, print writes the text and its newline apart, and mpirun
# then interleaved the two ranks' pieces on one line (seen once in CI under load).
sys.stdout.write("PEERS " + json.dumps({"host": socket.gethostname(), "bound": p.me["addr"],
                                        "got": got}) + "\\n")
sys.stdout.flush()
w.barrier()
"""


@pytest.mark.parametrize("named", [True, False])
def test_the_side_channel_spans_the_two_hosts(hosts: TwoHosts, tmp_path: Path,
                                              named: bool) -> None:
    # Named: the launcher names the interface (what --network-interfaces does); otherwise the
    # channel takes the address its routing uses to reach the other host. Never 0.0.0.0,
    # never loopback across hosts, and each rank hears the other.
    script = tmp_path / "ask.py"
    script.write_text(ASK)
    pin = "--mca btl_tcp_if_include hvd0 --mca oob_tcp_if_include hvd0" if named else ""
    mpirun = (f"cd {ROOT} && env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
              f"mpirun -np 2 -H {hosts.addr[0]}:1,{hosts.addr[1]}:1 {pin} "
              f"{sys.executable} {script}")
    r = subprocess.run(hosts.in_first(mpirun), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    seen = [json.loads(x.split("PEERS ", 1)[1]) for x in r.stdout.splitlines() if "PEERS " in x]
    assert sorted(s["host"] for s in seen) == sorted(hosts.names), r.stdout
    for s in seen:
        assert s["bound"] in hosts.addr, s  # the interface the ranks talk over
        assert list(s["got"].values()) == [{"phase": "step 1", "step": 1, "kind": "compute",
                                            "for_s": 1.0, "waiting": False}], s
