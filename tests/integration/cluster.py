"""Clusters made on this machine for the integration tests: a private SLURM (munge, slurmctld,
slurmd), hosts as network namespaces joined by a veth pair, and sshd on each.

Every test that starts such a cluster uses these helpers, so starting and tearing down work the
same way everywhere. Each test still picks its own names, addresses, ports and directories, so
that a leftover of one cannot disturb another.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import psutil

from tests.integration.system_deps import SBIN


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


def pid_from(pidfile: Path) -> int | None:
    """The pid a daemon wrote into ``pidfile`` (None: no file or no number)."""
    try:
        return int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


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


def end_conf_processes(conf: Path, grace_s: float = 5.0) -> None:
    """End every process that runs with ``SLURM_CONF=conf`` (daemons' children, job steps,
    ranks): all of them were started by the test that owns ``conf``."""
    mine = []
    for p in psutil.process_iter():
        try:
            if p.pid != os.getpid() and p.environ().get("SLURM_CONF") == str(conf):
                mine.append(p)
        except (psutil.Error, OSError):
            continue
    for p in mine:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(mine, timeout=grace_s)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()


def slurm_env(conf: Path) -> dict[str, str]:
    """This process's environment without SLURM's job variables, talking to ``conf``'s cluster."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
    env.update(SLURM_CONF=str(conf), OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", TF_CPP_MIN_LOG_LEVEL="2")
    return env


def slurm_conf(d: Path, name: str, control: str, ports: tuple[int, int], body: str) -> str:
    """A slurm.conf for a private cluster in directory ``d`` (state, logs, munge under it).

    Args:
        d: the cluster's directory; ``d/munge/munge.socket`` is munged's socket.
        name: ClusterName.
        control: SlurmctldHost, e.g. ``node(127.0.0.1)``.
        ports: slurmctld's and slurmd's ports.
        body: the lines that differ per cluster (spool, pid and log files, timeouts, nodes,
            partition).
    """
    return f"""\
ClusterName={name}
SlurmctldHost={control}
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d / "munge" / "munge.socket"}
CredType=cred/munge
StateSaveLocation={d / "state"}
SlurmctldPidFile={d / "slurmctld.pid"}
SlurmctldLogFile={d / "log" / "slurmctld.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
{body}"""


def munge_dirs(d: Path, *more: str) -> Path:
    """Make ``d``'s state, log and munge directories (and ``more``) and a fresh munge key;
    returns the key's path."""
    for sub in ("state", "log", "munge", *more):
        (d / sub).mkdir()
    (d / "munge").chmod(0o700)
    key = d / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    return key


def munged_argv(d: Path) -> list[str]:
    """munged for the cluster in ``d`` (see ``munge_dirs``), its pid file ``d/munge/munged.pid``."""
    m = d / "munge"
    return [str(SBIN / "munged"), f"--key-file={m / 'munge.key'}",
            f"--socket={m / 'munge.socket'}", f"--pid-file={m / 'munged.pid'}",
            f"--log-file={d / 'log' / 'munged.log'}", f"--seed-file={m / 'seed'}", "--force"]


def wait_idle(states: Callable[[], dict[str, str]], want: int, logs: Callable[[], str],
              timeout_s: float = 60) -> None:
    """Poll ``states()`` (node -> SLURM state) until ``want`` nodes are idle, else fail with
    ``logs()``."""
    deadline = time.monotonic() + timeout_s
    seen: dict[str, str] = {}
    while time.monotonic() < deadline:
        seen = states()
        if sorted(seen.values()) == ["idle"] * want:
            return
        time.sleep(1)
    raise AssertionError(f"nodes never all idle ({seen}):{logs()}")


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
