"""The several-node SLURM scripts on a real two-node SLURM cluster made on this machine.

Each node is a network namespace (the two joined by a veth pair named ``hvd0`` on both sides)
with its own hostname and mount namespace, in which its ``slurmd -N NODE`` and its ``sshd``
run: job steps and ranks on a node inherit its network, its name and its ``/etc/hosts`` (both
node names) and ssh client config (the test's key, no host-key prompts), bind-mounted there
only. ``slurmctld`` runs beside the first node's slurmd, reachable from both at that node's
address; one ``munged`` on the host serves both, its socket in the test's directory. Client
commands (``sbatch``, ``scontrol``) run in the first namespace. The cluster itself is
tests/integration/two_nodes.py.

Each script runs a 2-rank sweep point with one rank per node (``sbatch --wait``, the three
submitted at once), and the records' ``rank_hosts`` must name both nodes. Then, under each
script, a node dies in the middle of a job: the sweep must record the point as failed once,
naming the dead node, and the job must end.

Names, addresses, ports, directories and the partition differ from ``test_slurm.py`` and
``test_netns.py`` so that a leftover of one cannot disturb another. The fixture ends every
process it started (pid files, then whatever still runs in the namespaces or with this
cluster's SLURM_CONF) and deletes the namespaces, even when a test fails. The node-death tests
(one per script) kill the second node and start it again before the next, so they come last.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.integration.cluster import ns_pids, sh
from tests.integration.system_deps import ensure_system_deps
from tests.integration.two_nodes import Cluster, two_node_cluster

ROOT = Path(__file__).resolve().parents[2]
# Small runs: the point of these tests is where the ranks ran, not how fast.
TINY = ["--set", "measure.warmup_steps=2", "--set", "measure.steps=4",
        "--set", "data.synthetic.sentences_per_rank=64", "--no-plot"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
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
    # A short folder, not pytest's: slurmstepd's socket lives at SPOOL/NODE_JOB.4294967291 and a
    # Unix socket path holds 108 bytes at most. Under pytest-xdist's popen-gwN folder inside
    # tests/run.sh's scratch it reached 109, and every job step failed (issue 49).
    d = Path(tempfile.mkdtemp(prefix="sl2-"))
    try:
        with two_node_cluster(d, str(os.getpid() % 10000)) as c:
            yield c
    finally:
        signal.signal(signal.SIGTERM, previous)
        shutil.rmtree(d, ignore_errors=True)


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
    # The launch of the np=2 points (demo.yaml: torch); ``strategy`` is its one point.
    (log,) = (out / "results" / "logs").glob("r1_np2_torch_*_1.stdout")
    assert f"strategy.name={strategy}" in _read(log.with_suffix(".plan.json"))
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


# Each launcher learns of a dead node its own way: srun from SLURM ("Node failure on X"),
# mpirun and horovodrun from the lost connection to their daemon on it.
DEATH_EXTRA = {"srun": {}, "mpirun": {}, "horovodrun": {"NICS": "hvd0"}}


@pytest.mark.parametrize("launcher", ["srun", "mpirun", "horovodrun"])
def test_a_node_dying_mid_job_fails_the_point_and_ends_the_job(cluster: Cluster, launcher: str,
                                                               tmp_path: Path) -> None:
    """The second node dies in the middle of a 2-rank point; it is brought back afterwards."""
    cluster.revive_node(1)  # after an earlier case killed it
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
    script = SCRIPTS[launcher][0]
    job = subprocess.Popen(_sbatch_argv(cluster, script, out, args), cwd=ROOT,
                           env=_job_env(cluster, out, STRATEGIES="horovod",
                                        **DEATH_EXTRA[launcher]),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        took = _kill_node_when_training(cluster, job, timeline, out)
    finally:
        if job.poll() is None:
            job.kill()
        sbatch_out = job.communicate()[0]
    text = _read(out / "job.out")
    # The job ended because its point failed (sweep exit 1), not because SLURM killed it.
    assert job.returncode == 1, f"sbatch exit {job.returncode}: {sbatch_out}{_why(cluster, out)}"
    assert "[1/1] torch horovod np=2: FAILED" in text and "1 of 1 points failed" in text, text
    recs = _records(out)
    # Exactly one record, written by the sweep on the surviving node, naming the dead node.
    assert [(x["status"], x["ranks"], x["timed_out"]) for x in recs] == [("failed", 2, False)], \
        f"{recs}{_why(cluster, out)}"
    said = {"srun": f"Node failure on {cluster.names[1]}"}.get(
        launcher, f"lost node {cluster.names[1]}:")
    assert said in recs[0]["error"], f"{recs[0]['error']}{_why(cluster, out)}"
    if launcher == "srun":  # SLURM itself found the node dead (mpirun and horovodrun can be
        # quicker: they see their daemon's connection drop)
        assert cluster.states().get(cluster.names[1], "").startswith("down"), cluster.states()
    # Nothing of the job is left on the surviving node: no hvdscale process (`python -m
    # hvdscale ...` or the `hvdscale` script). By argument, not substring: the node's own sshd
    # names its config under the run's temporary folder, whatever that is called.
    left = []
    for pid in ns_pids(cluster.ns[0]):
        with contextlib.suppress(psutil.Error):
            cmd = psutil.Process(pid).cmdline()
            if any(Path(arg).name == "hvdscale" for arg in cmd):
                left.append(cmd)
    assert not left, left
    print(f"{launcher}: job ended {took:.0f} s after the node died")


def _kill_node_when_training(c: Cluster, job: subprocess.Popen, timeline: Path,
                             out: Path) -> float:
    """Kill the second node once both ranks train; seconds until the job then ended."""
    deadline = time.monotonic() + 120
    while _allreduces_done(timeline) < 3 and job.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _allreduces_done(timeline) >= 3, \
        f"training never got going on both nodes{_why(c, out)}"
    c.kill_node(1)
    killed = time.monotonic()
    while job.poll() is None:
        # SLURM requeues a job it kills for a node failure: that would wait forever.
        info = sh(*c.client("scontrol", "-o", "show", "job"), env=c.env, check=False).stdout
        assert "Restarts=0" in info or "JobState=" not in info, \
            f"the job was requeued after the node died:\n{info}{_why(c, out)}"
        assert time.monotonic() - killed < 120, \
            f"the job did not end within 120 s of the node's death:\n{info}{_why(c, out)}"
        time.sleep(1)
    return time.monotonic() - killed
