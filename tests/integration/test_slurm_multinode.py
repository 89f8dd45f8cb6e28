"""The several-node SLURM scripts on a real two-node SLURM cluster made on this machine.

Each node is a network namespace (the two joined by a veth pair named ``hvd0`` on both sides)
with its own hostname and mount namespace, in which its ``slurmd -N NODE`` and its ``sshd``
run: job steps and ranks on a node inherit its network, its name and its ``/etc/hosts`` (both
node names) and ssh client config (the test's key, no host-key prompts), bind-mounted there
only. ``slurmctld`` runs beside the first node's slurmd, reachable from both at that node's
address; one ``munged`` on the host serves both, its socket in the test's directory. Client
commands (``sbatch``, ``scontrol``) run in the first namespace.

Each script runs a 2-rank sweep point with one rank per node (``sbatch --wait``, the three
submitted at once), and the records' ``rank_hosts`` must name both nodes. Then a node dies in
the middle of a job: the sweep must record the point as failed and the job must end.

Names, addresses, ports, directories and the partition differ from ``test_slurm.py`` and
``test_netns.py`` so that a leftover of one cannot disturb another. The fixture ends every
process it started (pid files, then whatever still runs in the namespaces or with this
cluster's SLURM_CONF) and deletes the namespaces, even when a test fails. The node-death test
kills the second node, so it comes last.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

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
from tests.integration.system_deps import SBIN, ensure_system_deps

ROOT = Path(__file__).resolve().parents[2]
# Small runs: the point of these tests is where the ranks ran, not how fast.
TINY = ["--set", "measure.warmup_steps=2", "--set", "measure.steps=4",
        "--set", "data.synthetic.sentences_per_rank=64", "--no-plot"]
CTLD_PORT, SLURMD_PORT = 6917, 6918  # inside the namespaces; nothing else listens there

pytestmark = pytest.mark.slow


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
            for i, name in enumerate(c.names):
                daemons = [f"/usr/sbin/sshd -f {c.dir / f'sshd-{name}.conf'} "
                           f"-E {c.dir / 'log' / f'sshd-{name}.log'}"]
                if i == 0:  # the controller lives on the first node
                    daemons.append(f"{SBIN / 'slurmctld'} -i")
                daemons.append(f"{SBIN / 'slurmd'} -N {name}")
                sh(*c.on_node(i, " && ".join(daemons)), env=c.env, timeout=60)
            wait_idle(c.states, 2, c.logs)
            yield c
        finally:
            _teardown(c)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A running two-node SLURM cluster, torn down after the module's last test."""
    if os.geteuid() != 0:
        pytest.skip("the two-node SLURM needs root (network namespaces, daemons as root)")
    ensure_system_deps("slurmctld", "slurmd", "sbatch", "munged", "sshd", "ssh-keygen", "ip",
                       "unshare", "nsenter")
    # A SIGTERM (an outer time limit) would end pytest without any teardown, leaving daemons
    # and namespaces behind: make it an interrupt, which unwinds through the fixture.
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        with two_node_cluster(tmp_path_factory.mktemp("slurm2"),
                              str(os.getpid() % 10000)) as c:
            yield c
    finally:
        signal.signal(signal.SIGTERM, previous)


def _job_env(c: Cluster, out: Path, **extra: str) -> dict[str, str]:
    return {**c.env, "OUT": str(out / "results"), "HVDSCALE": f"{sys.executable} -m hvdscale",
            "NP": "2", **extra}


def _sbatch_argv(c: Cluster, script: str, out: Path, args: list[str]) -> list[str]:
    # One rank per node, so that the sweep's 2-rank point must span both nodes.
    return c.client("sbatch", "--wait", f"--output={out / 'job.out'}", "--nodes=2",
                    "--ntasks-per-node=1", f"launch/slurm/{script}", "configs/demo.yaml", *args)


def _why(c: Cluster, out: Path) -> str:
    """Everything that explains a failed job: its output, the points' logs, the daemons'."""
    text = f"\njob output:\n{_read(out / 'job.out')}"
    for f in sorted((out / "results" / "logs").glob("*")):
        text += f"\n== {f.name}\n{_read(f)[-3000:]}"
    return text + c.logs()


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _records(out: Path) -> list[dict]:
    return [json.loads(x) for x in _read(out / "results" / "results.jsonl").splitlines()]


# The three scripts, each with the strategy and environment its test checks. Submitted together
# (each by its own `sbatch --wait`): one rank per node leaves room for two jobs at a time on
# the nodes' two CPUs, and on a loaded machine the overlap saves about a minute.
SCRIPTS = {
    "srun": ("multinode_srun.sbatch", {"STRATEGIES": "horovod"}),
    "mpirun": ("multinode_mpirun.sbatch", {"STRATEGIES": "ps"}),
    "horovodrun": ("multinode_horovodrun.sbatch", {"STRATEGIES": "horovod", "NICS": "hvd0"}),
}


@pytest.fixture(scope="module")
def jobs(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Run every script in SCRIPTS to its end; the results directory of each, by name."""
    base = tmp_path_factory.mktemp("jobs")
    running = {}
    try:
        # The slowest first: SLURM starts jobs in submission order as CPUs free up.
        for name in ("horovodrun", "srun", "mpirun"):
            script, extra = SCRIPTS[name]
            out = base / name
            out.mkdir()
            running[name] = (out, subprocess.Popen(
                _sbatch_argv(cluster, script, out, TINY), cwd=ROOT,
                env=_job_env(cluster, out, **extra), stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True))
        deadline = time.monotonic() + 300
        for out, job in running.values():
            try:
                job.wait(timeout=max(1.0, deadline - time.monotonic()))
                status = f"exit {job.returncode}"
            except subprocess.TimeoutExpired:
                status = "did not end within 300 s"
            finally:
                if job.poll() is None:
                    job.kill()
            (out / "sbatch.out").write_text(f"{status}: {job.communicate()[0]}")
    finally:
        for _, job in running.values():
            if job.poll() is None:
                job.kill()
                job.wait()
    return {name: out for name, (out, _) in running.items()}


def _job_records(c: Cluster, out: Path) -> list[dict]:
    """Assert the job's `sbatch --wait` exited 0; its records."""
    assert _read(out / "sbatch.out").startswith("exit 0:"), \
        f"sbatch {_read(out / 'sbatch.out')}{_why(c, out)}"
    return _records(out)


def _assert_spans_both_nodes(c: Cluster, recs: list[dict], strategy: str, out: Path) -> None:
    assert [(x["key"]["strategy"], x["ranks"], x["status"]) for x in recs] == [
        (strategy, 2, "ok")], _why(c, out)
    # The ranks' own hostnames: rank 0 on the first node, rank 1 on the second.
    assert recs[0]["rank_hosts"] == list(c.names), recs[0]["rank_hosts"]
    assert recs[0]["words_per_s"] > 0


def _launch_line(out: Path, strategy: str) -> str:
    log = out / "results" / "logs" / f"demo_torch_{strategy}_np2.stdout"  # demo.yaml: torch
    return _read(log).splitlines()[0]


def test_srun_script_runs_ranks_on_both_nodes(cluster: Cluster, jobs: dict[str, Path]) -> None:
    out = jobs["srun"]
    _assert_spans_both_nodes(cluster, _job_records(cluster, out), "horovod", out)
    assert _launch_line(out, "horovod").startswith("$ srun --mpi=pmix -n 2 ")


def test_mpirun_script_runs_ranks_on_both_nodes(cluster: Cluster,
                                                jobs: dict[str, Path]) -> None:
    out = jobs["mpirun"]
    _assert_spans_both_nodes(cluster, _job_records(cluster, out), "ps", out)
    line = _launch_line(out, "ps")
    # mpirun read the nodes from the allocation: no hostfile was given to it.
    assert line.startswith("$ mpirun -np 2 ") and "hostfile" not in line, line


def test_horovodrun_script_runs_ranks_on_both_nodes(cluster: Cluster,
                                                    jobs: dict[str, Path]) -> None:
    out = jobs["horovodrun"]
    _assert_spans_both_nodes(cluster, _job_records(cluster, out), "horovod", out)
    (hostfile,) = (out / "results").glob("hostfile.*")
    assert hostfile.read_text() == "".join(f"{n} slots=1\n" for n in cluster.names)
    line = _launch_line(out, "horovod")
    assert line.startswith("$ horovodrun --mpi -np 2 -hostfile ") and \
        "--network-interfaces hvd0" in line, line


def _allreduces_done(timeline: Path) -> int:
    """Allreduces Horovod finished (each needs both ranks), from rank 0's timeline."""
    return _read(timeline).count('"name": "MPI_ALLREDUCE"')


def test_a_node_dying_mid_job_fails_the_point_and_ends_the_job(cluster: Cluster,
                                                               tmp_path: Path) -> None:
    """Runs last: the second node stays dead."""
    out = tmp_path / "death"
    out.mkdir()
    timeline = out / "timeline.json"
    # Far more steps than will run; --timeout is only the sweep's backstop, well above the
    # ~15 s SLURM needs here to declare the dead node DOWN.
    # timeline_steps=0: the timeline covers the whole run from hvd.init(), so finished
    # allreduces show up while training goes on (a window of steps would come after it).
    args = [*TINY, "--set", "measure.steps=100000", "--set",
            f"strategy.horovod.timeline={timeline}", "--set",
            "strategy.horovod.timeline_steps=0", "--timeout", "150"]
    job = subprocess.Popen(_sbatch_argv(cluster, "multinode_srun.sbatch", out, args), cwd=ROOT,
                           env=_job_env(cluster, out, STRATEGIES="horovod"),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while _allreduces_done(timeline) < 3 and job.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _allreduces_done(timeline) >= 3, \
            f"training never got going on both nodes{_why(cluster, out)}"
        cluster.kill_node(1)
        killed = time.monotonic()
        while job.poll() is None:
            # SLURM requeues a job it kills for a node failure: that would wait forever.
            info = sh(*cluster.client("scontrol", "-o", "show", "job"), env=cluster.env,
                       check=False).stdout
            assert "Restarts=0" in info or "JobState=" not in info, \
                f"the job was requeued after the node died:\n{info}{_why(cluster, out)}"
            assert time.monotonic() - killed < 120, \
                f"the job did not end within 120 s of the node's death:\n{info}" \
                f"{_why(cluster, out)}"
            time.sleep(1)
        took = time.monotonic() - killed
    finally:
        if job.poll() is None:
            job.kill()
        sbatch_out = job.communicate()[0]
    text = _read(out / "job.out")
    # The job ended because its point failed (sweep exit 1), not because SLURM killed it.
    assert job.returncode == 1, f"sbatch exit {job.returncode}: {sbatch_out}{_why(cluster, out)}"
    assert "[1/1] torch horovod np=2: FAILED" in text and "1 of 1 points failed" in text, text
    recs = _records(out)
    assert [(x["status"], x["ranks"], x["timed_out"]) for x in recs] == [("failed", 2, False)], \
        recs
    assert f"Node failure on {cluster.names[1]}" in recs[0]["error"], recs[0]["error"]
    assert cluster.states().get(cluster.names[1], "").startswith("down"), cluster.states()
    # Nothing of the job is left on the surviving node.
    left = []
    for pid in ns_pids(cluster.ns[0]):
        with contextlib.suppress(psutil.Error):
            if "hvdscale" in " ".join(cmd := psutil.Process(pid).cmdline()):
                left.append(cmd)
    assert not left, left
    print(f"job ended {took:.0f} s after the node died")
