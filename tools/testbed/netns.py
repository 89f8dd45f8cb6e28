"""Hosts made on this machine: two network namespaces joined by a veth pair, each with its own
address on an interface named ``hvd0``, its own hostname and its own sshd, so a launch can
span "hosts" without a cluster. Used by the multi-host integration tests and by the benches
that measure across hosts (bench/bench_predict_validate.py). Needs root, ``ip`` and sshd.

Each user picks its own names, addresses and directories (``host_pair``), so a leftover of
one cannot disturb another.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path


def sh(*cmd: str, timeout: float = 30, check: bool = True,
       env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``cmd``; with ``check``, an AssertionError naming the command and its output."""
    r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, env=env)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stdout}{r.stderr}")
    return r


def signal_pids(pids: Sequence[int], sig: int) -> None:
    """Send ``sig`` to each pid, ignoring those already gone."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


def ns_pids(ns: str) -> list[int]:
    """Processes in network namespace ``ns`` (this test process left out)."""
    out = sh("ip", "netns", "pids", ns, check=False).stdout.split()
    return [int(p) for p in out if p.isdigit() and int(p) != os.getpid()]


def kill_namespace(ns: str, grace_s: float = 5.0) -> None:
    """End every process in network namespace ``ns`` (TERM, then KILL)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = ns_pids(ns)
        signal_pids(pids, sig)
        deadline = time.monotonic() + grace_s
        while pids and time.monotonic() < deadline:
            time.sleep(0.2)
            pids = ns_pids(ns)
        if not pids:
            return


def host_pair(tag: str, ns: str, veth: str, name: str, net: int) -> dict[str, tuple[str, str]]:
    """Names for two namespace hosts of one test run (``tag``: a number unique to the run):
    ``ns`` (network namespaces), ``veth`` (the veth ends' temporary names; both become hvd0),
    ``addr`` (in 10.<net..net+49>.x.0/24) and ``names`` (hostnames)."""
    t = int(tag)
    subnet = f"10.{net + t % 50}.{t % 250}"
    return {"ns": (f"{ns}-a{tag}", f"{ns}-b{tag}"), "veth": (f"{veth}a{tag}", f"{veth}b{tag}"),
            "addr": (f"{subnet}.1", f"{subnet}.2"), "names": (f"{name}-a{tag}", f"{name}-b{tag}")}


def veth_hosts(ns: Sequence[str], veth: Sequence[str], addr: Sequence[str]) -> None:
    """Two network namespaces joined by a veth pair whose ends are both named ``hvd0``
    (horovodrun needs one interface name on every host), each end with its address in a /24."""
    for n in ns:
        sh("ip", "netns", "add", n)
    sh("ip", "link", "add", veth[0], "type", "veth", "peer", "name", veth[1])
    for n, v, a in zip(ns, veth, addr, strict=True):
        sh("ip", "link", "set", v, "netns", n)
        sh("ip", "-n", n, "link", "set", v, "name", "hvd0")
        sh("ip", "-n", n, "addr", "add", f"{a}/24", "dev", "hvd0")
        sh("ip", "-n", n, "link", "set", "hvd0", "up")
        sh("ip", "-n", n, "link", "set", "lo", "up")


def remove_hosts(ns: Sequence[str], veth: Sequence[str]) -> None:
    """End everything in the namespaces, delete them, and any veth end setup left behind."""
    for n in ns:
        kill_namespace(n)
        sh("ip", "netns", "del", n, check=False)
    for v in veth:  # only left behind when setup failed before moving it
        sh("ip", "link", "del", v, check=False)


def ssh_keys(d: Path, hosts: Sequence[str]) -> Path:
    """A client key, a host key and authorized_keys in ``d``, and an ssh client config for
    ``hosts`` (names or addresses) that uses the key without host-key prompts; returns the
    client config's path."""
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "id"))
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key"))
    (d / "authorized_keys").write_text((d / "id.pub").read_text())
    config = d / "ssh_config"
    config.write_text(f"Host {' '.join(hosts)}\n  IdentityFile {d / 'id'}\n"
                      "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
                      "  BatchMode yes\n  LogLevel ERROR\n")
    return config


def sshd_config(d: Path, addr: str, pidfile: Path) -> str:
    """An sshd config bound to ``addr`` that accepts only the key of ``ssh_keys(d, ...)``."""
    return (f"ListenAddress {addr}\nPort 22\nHostKey {d / 'host_key'}\n"
            f"PidFile {pidfile}\nAuthorizedKeysFile {d / 'authorized_keys'}\n"
            "StrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "UsePAM no\nPermitRootLogin prohibit-password\nPubkeyAuthentication yes\n")


@contextlib.contextmanager
def sshd_privsep() -> Iterator[None]:
    """sshd's privilege-separation directory, made if missing and removed again after."""
    privsep = Path("/run/sshd")
    made = not privsep.exists()
    if made:
        privsep.mkdir(mode=0o755)
    try:
        yield
    finally:
        if made:
            with contextlib.suppress(OSError):
                privsep.rmdir()



class TwoHosts:
    """Addresses, names and paths of the two namespace hosts."""

    def __init__(self, tmp: Path, tag: str) -> None:
        self.tmp = tmp
        pair = host_pair(tag, "hvdscale", "hvs", "hvd", 200)  # test_slurm_multinode: 150
        self.ns, self.veth, self.addr, self.names = (pair[k] for k in ("ns", "veth", "addr",
                                                                       "names"))
        self.ssh_config = tmp / "ssh_config"
        self.first_core: int | None = None
        """Host a's one core when the hosts are pinned (tools/testbed/link.py), else None."""

    def in_first(self, script: str) -> list[str]:
        """A shell command run as host a: its namespace, hostname and ssh client config."""
        # pinned, host a's own processes (mpirun, the ranks it starts there) share its one core
        pin = f"exec taskset -c {self.first_core} sh -c {shlex.quote(script)}" \
            if self.first_core is not None else script
        return ["ip", "netns", "exec", self.ns[0], "unshare", "--uts", "--mount", "--propagation",
                "private", "sh", "-c",
                f"mount --bind {self.ssh_config} /etc/ssh/ssh_config && "
                f"hostname {self.names[0]} && {pin}"]
