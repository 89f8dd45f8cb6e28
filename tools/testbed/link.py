"""Two namespace hosts with sshd (tools/testbed/netns.py), and ``hvdscale commbench`` run
across them over TCP on their veth link only: one rank a host, Open MPI's byte transfer layer
limited to ``tcp,self`` (no shared memory: the two hosts share this machine's /dev/shm, which
Open MPI would use only between ranks it takes for one node) and both its TCP BTL and its
out-of-band channel to ``hvd0``; ``hvdscale sweep`` (and any hvdscale command) the same way.
Used by bench/bench_shaped_link.py, bench_shaped_sweep.py, bench_shaped_fusion.py and
tests/integration/test_shaped_link.py, test_shaped_sweep.py; shape the link with
tools/testbed/shaping.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from tools.testbed import shaping
from tools.testbed.netns import (
    TwoHosts,
    host_pair,
    remove_hosts,
    sh,
    ssh_keys,
    sshd_config,
    sshd_privsep,
    veth_hosts,
)

ROOT = Path(__file__).resolve().parents[2]
MPI_TCP_ONLY = {"OMPI_MCA_btl": "tcp,self", "OMPI_MCA_btl_tcp_if_include": shaping.DEV,
                "OMPI_MCA_oob_tcp_if_include": shaping.DEV}
"""What every commbench across the hosts runs under (mpirun passes OMPI_* to every rank)."""


def _start_sshd(h: TwoHosts, work: Path, cores: list[int] | None) -> None:
    for i, (ns, addr, name) in enumerate(zip(h.ns, h.addr, h.names, strict=True)):
        conf = work / f"sshd_{name}.conf"
        conf.write_text(sshd_config(work, addr, work / f"sshd_{name}.pid"))
        # pinned, each host has a core of its own: what sshd starts (the ranks) inherits it
        pinning = f"taskset -c {cores[i % len(cores)]} " if cores else ""
        # own UTS namespace: the ranks sshd starts see this host's name
        sh("ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c",
           f"hostname {name} && exec {pinning}/usr/sbin/sshd -f {conf} "
           f"-E {work / f'sshd_{name}.log'}")


@contextlib.contextmanager
def ssh_hosts(work: Path, tag: str, prefix: str = "s63", net: int = 50,
              pin: bool = False) -> Iterator[TwoHosts]:
    """Two hosts joined by a veth pair, sshd in each, named ``<prefix>-a<tag>`` and
    ``<prefix>-b<tag>`` (addresses 10.<net..net+49>.x.1 and .2); with ``pin``, each host's
    processes on a core of its own (``taskset``: host a on this process's first allowed core,
    host b on its second), as two one-core hosts, not two sharing every core. Every process in
    them ended and both namespaces deleted on the way out, however left."""
    h = TwoHosts(work, tag)
    pair = host_pair(tag, prefix, prefix, prefix, net)
    h.ns, h.veth, h.addr, h.names = (pair[k] for k in ("ns", "veth", "addr", "names"))
    with sshd_privsep():
        try:
            for ns in h.ns:
                if Path("/run/netns", ns).exists():  # left by a run that was killed
                    remove_hosts([ns], [])
            veth_hosts(h.ns, h.veth, h.addr)
            ssh_keys(work, h.addr)
            cores = sorted(os.sched_getaffinity(0)) if pin else None
            _start_sshd(h, work, cores)
            h.first_core = cores[0] if cores else None
            for addr, name in zip(h.addr, h.names, strict=True):
                r = sh(*h.in_first(f"ssh {addr} hostname"), timeout=30)
                if r.stdout.strip() != name:
                    raise AssertionError(f"ssh {addr} answered {r.stdout!r}, not {name}")
            yield h
        finally:
            remove_hosts(h.ns, h.veth)


def hostfile(h: TwoHosts, out: Path) -> Path:
    """``out/hosts``: one slot on each host, so a 2-rank job puts one rank on each."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "hosts"
    path.write_text(f"{h.addr[0]} slots=1\n{h.addr[1]} slots=1\n")
    return path


def hvdscale(h: TwoHosts, args: Sequence[str], timeout: int, what: str) -> str:
    """``python -m hvdscale ARGS`` from the first host under the TCP-only MCA settings (mpirun
    passes OMPI_* to every rank), with the caller's PYTHONPATH; its stdout.

    Raises:
        AssertionError: the command failed (``what`` and its output in the message).
    """
    env = {**MPI_TCP_ONLY, "OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    if os.environ.get("PYTHONPATH"):  # the caller's checkout, for the command and its ranks
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    argv = [sys.executable, "-m", "hvdscale", *args]
    script = (f"cd {ROOT} && env {' '.join(f'{k}={shlex.quote(v)}' for k, v in env.items())} "
              + " ".join(shlex.quote(a) for a in argv))
    r = subprocess.run(h.in_first(script), capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise AssertionError(f"{what} across the hosts failed: {r.stdout[-3000:]}"
                             f"{r.stderr[-3000:]}")
    return r.stdout


def commbench(h: TwoHosts, out: Path, transports: str, sizes: str, repeats: int = 5,
              warmup: int = 1) -> dict:
    """``hvdscale commbench --np 2`` from the first host, one rank a host, over TCP on hvd0
    only; the result (commbench.json) with the MCA settings it ran under under ``mpi_env``.

    Raises:
        AssertionError: the command failed (its output in the message).
    """
    hosts = hostfile(h, out)
    hvdscale(h, ["commbench", "--np", "2", "--transports", transports, "--sizes", sizes,
                 "--repeats", str(repeats), "--warmup", str(warmup), "--hostfile", str(hosts),
                 "--network-interfaces", shaping.DEV, "--out", str(out), "--timeout", "120",
                 "--no-plot"], 300, "commbench")
    res = json.loads((out / "commbench.json").read_text())
    res["mpi_env"] = MPI_TCP_ONLY
    return res


def sweep(h: TwoHosts, out: Path, config: str, nps: str, strategies: str,
          sets: Sequence[str] = (), timeout: int = 600) -> str:
    """``hvdscale sweep`` of ``config`` from the first host, one rank a host (slots=1 each),
    under the same TCP-only MCA settings as commbench; its stdout.

    Raises:
        AssertionError: the sweep failed (its output in the message).
    """
    args = ["sweep", config, "--np", nps, "--strategies", strategies, "--hostfile",
            str(hostfile(h, out)), "--network-interfaces", shaping.DEV, "--out", str(out),
            "--timeout", str(timeout), "--no-plot"]
    for s in sets:
        args += ["--set", s]
    return hvdscale(h, args, timeout * 4 + 120, "sweep")


def link_gbit(res: dict, transport: str) -> dict[int, float]:
    """Per size, the link's rate in Gbit/s one commbench transport sustained (its busbw:
    the bytes one rank's link carries each way, per second)."""
    return {int(p["bytes"]): p["busbw_GBps"] * 8 for p in res["transports"][transport]["points"]}


def best_link_gbit(res: dict, transport: str) -> dict[int, float]:
    """Per size, the link's rate in its fastest repeat: other work on a shared host can only
    slow a repeat down, never carry it past the link's rate (bar tbf's burst)."""
    tr = res["transports"][transport]
    return {int(p["bytes"]): p["bytes"] * tr["busbw_factor"] * 8 / min(p["times_s"]) / 1e9
            for p in tr["points"]}


def transports_in_force(res: dict, hosts: Sequence[str]) -> dict:
    """Which transport carried the bytes, from what each rank says it ran under; refused
    unless one rank ran on each host, with the TCP BTL alone limited to hvd0.

    Raises:
        AssertionError: a rank elsewhere, or another transport allowed.
    """
    (job,) = res["jobs"].values()
    ranks = job["per_rank"]
    if sorted(r["host"] for r in ranks) != sorted(hosts):
        raise AssertionError(f"ranks ran on {[r['host'] for r in ranks]}, not one on each of "
                             f"{list(hosts)}")
    for r in ranks:
        if r["btl"] != "tcp,self" or r["btl_tcp_if_include"] != shaping.DEV:
            raise AssertionError(f"rank on {r['host']}: btl {r['btl']!r} over "
                                 f"{r['btl_tcp_if_include']!r}, not tcp,self over {shaping.DEV}")
    return {"btl": "tcp,self", "btl_tcp_if_include": shaping.DEV,
            "oob_tcp_if_include": shaping.DEV, "per_rank": ranks,
            "command": " ".join(job["command"])}
