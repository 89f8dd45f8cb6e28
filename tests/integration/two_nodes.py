"""The two-node SLURM cluster of test_slurm_multinode.py, made on this machine.

Each node is a network namespace (the two joined by a veth pair named ``hvd0`` on both sides)
with its own hostname and mount namespace, in which its ``slurmd -N NODE`` and its ``sshd``
run; ``slurmctld`` runs beside the first node's slurmd; one ``munged`` on the host serves both.
A node can be killed (every process in its namespace) and started again.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator
from pathlib import Path

from tests.integration.cluster import (
    end_conf_processes,
    host_pair,
    kill_namespace,
    munge_dirs,
    munged_argv,
    ns_pids,
    pid_from,
    remove_hosts,
    sh,
    signal_pids,
    slurm_conf,
    slurm_env,
    ssh_keys,
    sshd_config,
    sshd_privsep,
    veth_hosts,
    wait_idle,
)
from tests.integration.system_deps import SBIN

CTLD_PORT, SLURMD_PORT = 6917, 6918  # inside the namespaces; nothing else listens there


class Cluster:
    """Names, addresses and paths of the two-node cluster; commands that reach it."""

    def __init__(self, tmp: Path, tag: str) -> None:
        self.dir = tmp
        pair = host_pair(tag, "hvdslurm", "hvm", "slnode", 150)  # test_netns uses 10.200-249
        self.ns, self.veth, self.addr, self.names = (pair[k] for k in ("ns", "veth", "addr",
                                                                       "names"))
        self.conf = tmp / "slurm.conf"
        self.hosts = tmp / "hosts"
        self.ssh_config = tmp / "ssh_config"
        self.munge_pid = tmp / "munge" / "munged.pid"
        self.env = slurm_env(self.conf)

    def slurmd_pid(self, i: int) -> Path:
        return self.dir / f"slurmd-{self.names[i]}.pid"

    def pidfiles(self) -> list[Path]:
        return [self.slurmd_pid(0), self.slurmd_pid(1), self.dir / "slurmctld.pid",
                *(self.dir / f"sshd-{n}.pid" for n in self.names), self.munge_pid]

    def client(self, *cmd: str) -> list[str]:
        """``cmd`` run in the first node's network namespace, where slurmctld listens."""
        return ["ip", "netns", "exec", self.ns[0], *cmd]

    def on_node(self, i: int, script: str) -> list[str]:
        """A shell command run as node ``i``: its network, hostname, /etc/hosts, ssh config."""
        # nsenter, not `ip netns exec`: that remounts /sys, hiding the cgroup mounts slurmd
        # needs even with proctrack/linuxproc.
        return ["nsenter", f"--net=/run/netns/{self.ns[i]}", "unshare", "--uts", "--mount",
                "--propagation", "private", "sh", "-c",
                f"mount --bind {self.hosts} /etc/hosts && "
                f"mount --bind {self.ssh_config} /etc/ssh/ssh_config && "
                f"hostname {self.names[i]} && {script}"]

    def states(self) -> dict[str, str]:
        """Node name -> SLURM state, as sinfo reports it."""
        r = sh(*self.client("sinfo", "-h", "-N", "-o", "%N %T"), env=self.env, check=False)
        return dict(line.split() for line in r.stdout.splitlines() if len(line.split()) == 2)

    def logs(self) -> str:
        return "".join(f"\n== {f.name}\n{f.read_text(errors='replace')[-3000:]}"
                       for f in sorted((self.dir / "log").glob("*.log")))

    def start_node(self, i: int) -> None:
        """Start node ``i``'s daemons: sshd, slurmctld (first node only) and slurmd."""
        name = self.names[i]
        daemons = [f"/usr/sbin/sshd -f {self.dir / f'sshd-{name}.conf'} "
                   f"-E {self.dir / 'log' / f'sshd-{name}.log'}"]
        if i == 0:  # the controller lives on the first node
            daemons.append(f"{SBIN / 'slurmctld'} -i")
        daemons.append(f"{SBIN / 'slurmd'} -N {name}")
        sh(*self.on_node(i, " && ".join(daemons)), env=self.env, timeout=60)

    def revive_node(self, i: int) -> None:
        """Bring node ``i`` back after ``kill_node`` (ReturnToService=2 makes it idle again as
        soon as its slurmd registers); nothing when it runs."""
        if ns_pids(self.ns[i]):
            return
        self.start_node(i)
        wait_idle(self.states, len(self.names), self.logs, timeout_s=90)

    def kill_node(self, i: int) -> None:
        """Node ``i`` dies: its slurmd, job steps, ranks and sshd all get SIGKILL at once."""
        deadline = time.monotonic() + 10
        while (pids := ns_pids(self.ns[i])) and time.monotonic() < deadline:
            signal_pids(pids, signal.SIGKILL)
            time.sleep(0.2)
        assert not ns_pids(self.ns[i]), f"node {self.names[i]} would not die"


def _write_configs(c: Cluster) -> None:
    d = c.dir
    munge_dirs(d, *(f"{k}-{n}" for n in c.names for k in ("spool", "tmp")))
    # The hardware line slurmd sees here (CPUs, cores, memory), once per node name.
    hw = sh(str(SBIN / "slurmd"), "-C").stdout.splitlines()[0].split(maxsplit=1)[1]
    nodes = "".join(f"NodeName={n} NodeAddr={a} {hw} State=UNKNOWN\n"
                    for n, a in zip(c.names, c.addr, strict=True))
    # TmpFS per node: PMIx puts its per-step directory there, and the nodes share /tmp.
    # MinJobAge=4 keeps `sbatch --wait` polling every 2 s (it backs off to 32 s when the
    # cluster keeps finished jobs longer). A dead node is declared DOWN after SlurmdTimeout
    # plus the failed pings' MessageTimeout (measured: 10 and 5 give ~15 s, where the default
    # MessageTimeout=10 gave ~25 s); KillWait=2 cleans up a killed step within seconds.
    c.conf.write_text(slurm_conf(d, "hvdscalemulti", f"{c.names[0]}({c.addr[0]})",
                                 (CTLD_PORT, SLURMD_PORT), f"""\
SlurmdSpoolDir={d / "spool-%n"}
TmpFS={d / "tmp-%n"}
SlurmdPidFile={d / "slurmd-%n.pid"}
SlurmdLogFile={d / "log" / "slurmd-%n.log"}
SlurmdTimeout=10
MessageTimeout=5
MinJobAge=4
KillWait=2
{nodes}PartitionName=multi Nodes={",".join(c.names)} Default=YES MaxTime=INFINITE State=UP
"""))
    hosts = Path("/etc/hosts").read_text()
    c.hosts.write_text(hosts + "".join(f"{a} {n}\n" for n, a in zip(c.names, c.addr,
                                                                     strict=True)))
    assert ssh_keys(d, [*c.names, *c.addr]) == c.ssh_config
    for n, a in zip(c.names, c.addr, strict=True):
        (d / f"sshd-{n}.conf").write_text(sshd_config(d, a, d / f"sshd-{n}.pid"))


def _teardown(c: Cluster) -> None:
    with contextlib.suppress(Exception):
        sh(*c.client("scancel", "--full", "--partition=multi"), env=c.env, check=False)
    pids = [p for p in map(pid_from, c.pidfiles()) if p is not None]
    signal_pids(pids, signal.SIGTERM)
    remove_hosts(c.ns, c.veth)
    end_conf_processes(c.conf)
    signal_pids(pids, signal.SIGKILL)


@contextlib.contextmanager
def two_node_cluster(tmp: Path, tag: str) -> Iterator[Cluster]:
    """Start the cluster in ``tmp``; stop every part of it on the way out, however left."""
    c = Cluster(tmp, tag)
    # The nodes (and sshd on them) end before sshd's privilege-separation dir goes.
    with sshd_privsep():
        try:
            for ns in c.ns:
                if Path("/run/netns", ns).exists():  # left by an earlier run of this test
                    kill_namespace(ns)
                    sh("ip", "netns", "del", ns)
            veth_hosts(c.ns, c.veth, c.addr)
            _write_configs(c)
            sh(*munged_argv(c.dir), env=c.env)
            for i in range(len(c.names)):
                c.start_node(i)
            wait_idle(c.states, 2, c.logs)
            yield c
        finally:
            _teardown(c)
