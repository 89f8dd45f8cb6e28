"""`torchrun --nnodes 2` with c10d rendezvous across the two network-namespace hosts of
tools/testbed, with no MPI on either (tests/torchrun/nompi first on the ranks' PYTHONPATH).

Each host is a network namespace with its own address on ``hvd0``, its own hostname (a UTS
namespace) and, in a private mount namespace, an /etc/hosts naming both hosts, as a cluster's
name service would: torchrun's c10d rendezvous resolves the hosts' names. One torchrun agent
runs on each host with one rank; no ssh is needed (torchrun starts no remote processes).
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
from tools.testbed.netns import host_pair, remove_hosts, veth_hosts

ROOT = Path(__file__).resolve().parents[2]
NOMPI = ROOT / "tests" / "torchrun" / "nompi"
TINY = ["--set", "measure.warmup_steps=1", "--set", "measure.steps=3",
        "--set", "data.synthetic.sentences_per_rank=64"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[str, str]]]:
    ensure_system_deps("ip", "unshare")
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    tag = str(os.getpid() % 10000)
    pair = host_pair(tag, "hvstr", "hvt", "trn", 100)  # test_netns: 200, multinode SLURM: 150
    tmp = tmp_path_factory.mktemp("torchrun-hosts")
    etc_hosts = tmp / "hosts"
    etc_hosts.write_text("127.0.0.1 localhost\n" + "".join(
        f"{a} {n}\n" for a, n in zip(pair["addr"], pair["names"], strict=True)))
    try:
        veth_hosts(pair["ns"], pair["veth"], pair["addr"])
        yield {**pair, "etc_hosts": (str(etc_hosts), "")}
    finally:
        remove_hosts(pair["ns"], pair["veth"])


def _agent(hosts: dict, i: int, out: Path, strategy: str, port: int) -> subprocess.Popen:
    """Host ``i``'s torchrun agent (rank ``i``; host a holds the c10d store)."""
    run = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
           "--nproc-per-node", "1", "--rdzv-backend", "c10d",
           "--rdzv-endpoint", f"{hosts['addr'][0]}:{port}", "--rdzv-id", f"two-{port}",
           "--max-restarts", "0", "-m", "hvdscale", "run", "configs/demo.yaml", "--out",
           str(out), "--set", f"strategy.name={strategy}", *TINY]
    script = (f"mount --bind {hosts['etc_hosts'][0]} /etc/hosts && "
              f"hostname {hosts['names'][i]} && cd {ROOT} && exec " + " ".join(run))
    env = {**os.environ, "PYTHONPATH": f"{NOMPI}:{ROOT}", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(["ip", "netns", "exec", hosts["ns"][i], "unshare", "--uts",
                             "--mount", "--propagation", "private", "sh", "-c", script],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.parametrize("strategy", ["ddp", "independent"])
def test_a_two_node_torchrun_spans_both_hosts_without_mpi(hosts: dict, strategy: str,
                                                          tmp_path: Path) -> None:
    out = tmp_path / "results"
    port = 29400 + os.getpid() % 500
    agents = [_agent(hosts, i, out, strategy, port) for i in (0, 1)]
    said = []
    try:
        for a in agents:
            said.append(a.communicate(timeout=240)[0])
    finally:
        for a in agents:
            if a.poll() is None:
                a.kill()
    text = "\n".join(said)
    assert [a.returncode for a in agents] == [0, 0], text[-4000:]
    (line,) = (out / "results.jsonl").read_text().splitlines()
    rec = json.loads(line)
    assert rec["status"] == "ok" and rec["launcher_backend"] == "torchrun"
    # One rank on each host: the job really spanned both.
    assert rec["ranks"] == 2 and rec["rank_hosts"] == list(hosts["names"]), rec["rank_hosts"]
    if strategy == "ddp":
        rv = rec["strategy"]["rendezvous"]
        assert rv["source"] == "launcher" and rv["ifname"] == "hvd0", rv
