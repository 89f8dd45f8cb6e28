"""Clusters made on this machine for the integration tests: a private SLURM (munge, slurmctld,
slurmd), on hosts as network namespaces joined by a veth pair with sshd on each (those live in
tools/testbed/netns.py, shared with the benches).

Every test that starts such a cluster uses these helpers, so starting and tearing down work the
same way everywhere. Each test still picks its own names, addresses, ports and directories, so
that a leftover of one cannot disturb another.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from tests.integration.system_deps import SBIN
from tools.testbed.netns import (  # noqa: F401  (re-exported: the tests import them here)
    host_pair,
    kill_namespace,
    ns_pids,
    remove_hosts,
    sh,
    signal_pids,
    ssh_keys,
    sshd_config,
    sshd_privsep,
    veth_hosts,
)


def pid_from(pidfile: Path) -> int | None:
    """The pid a daemon wrote into ``pidfile`` (None: no file or no number)."""
    try:
        return int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


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


