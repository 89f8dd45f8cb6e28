"""``hvdscale sweep``: every (ranks, strategy) point as its own launch, then the report.

A sweep is planned and checked completely before the first launch: the config (with every
strategy applied), the rank counts, the launcher and the hostfile's slots. Bad input therefore
costs one error line and leaves earlier results as they were. Each point then runs as one
``mpirun``/``horovodrun``/``srun`` subprocess with a time limit; its ranks write the usual
record. A point that fails (non-zero exit, time limit, no record) gets a ``status: failed``
record with the last lines of its stderr, and the sweep goes on. Points whose ``ok`` record is
already in the results directory (same config, same ranks) are skipped unless ``redo``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hvdscale.config import STRATEGIES, RunConfig, check_launch, load_config, to_dict
from hvdscale.core import data
from hvdscale.errors import HvdscaleError
from hvdscale.records.experiment import same_point
from hvdscale.records.store import (
    append_record,
    check_writable,
    read_records,
    record_key,
    results_path,
)
from hvdscale.study.hostfile import Hostfile, parse_hostfile, write_hostfile

LAUNCHERS = ("mpirun", "horovodrun", "srun")

# What remote ranks need from the launching shell. mpirun starts remote ranks through ssh with
# the remote login's environment, so these travel with ``-x``; horovodrun already exports the
# whole environment and srun does by default (--export=ALL). OMPI_MCA_* need no -x: mpirun
# forwards MCA parameters itself, and the runner sets mpi_yield_when_idle per process.
EXPORT_VARS = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONUNBUFFERED", "VIRTUAL_ENV",
               "PYENV_VERSION", "CONDA_PREFIX", "TF_CPP_MIN_LOG_LEVEL")
EXPORT_PREFIXES = ("HOROVOD_", "HVDSCALE_", "NCCL_")

# mpirun's and srun's closing boilerplate says nothing about why a rank failed; left out of
# the error (srun's "task N: Killed" follows the line that says why, e.g. "Node failure on X").
_BOILERPLATE = re.compile(
    r"^(-{5,}|Primary job +terminated|a non-zero exit code|Per user-direction|"
    r"mpirun (detected|noticed|has exited)|Process name:|Exit code:|\[[\w.-]+:\d+\] \d+ more|"
    r"Set MCA parameter|srun: (error: )?(Job step aborted|.*Terminating|Force Terminated)|"
    r"srun: error: [\w.-]+: tasks? [\d,-]+: (Killed|Terminated)$)")


@dataclass(frozen=True)
class Point:
    """One launch of the sweep: a strategy at a rank count, with its resolved config.

    ``sets`` are this point's own ``--set`` overrides on top of the sweep's (e.g. a fusion
    threshold), already applied in ``cfg``; ``name`` labels such a point.
    """

    index: int
    strategy: str
    ranks: int
    cfg: RunConfig
    sets: tuple[str, ...] = ()
    name: str = ""

    @property
    def label(self) -> str:
        what = self.name or self.strategy
        return f"{self.cfg.framework} {what} np={self.ranks}"


@dataclass(frozen=True)
class SweepSpec:
    """Everything a sweep needs, validated by :func:`plan_sweep`."""

    config: Path
    overrides: tuple[str, ...]
    points: tuple[Point, ...]
    launcher: str
    out: Path
    hostfile: Hostfile | None = None
    network_interfaces: str | None = None
    launcher_args: tuple[str, ...] = ()
    timeout_s: float = 900.0
    redo: bool = False
    progress_every: float | None = None
    """Each point's ``hvdscale run --progress-every`` (its plain lines in logs/); None: run's
    default."""


@dataclass
class Outcome:
    """What became of one point."""

    point: Point
    status: str  # "ok", "skipped" or "failed"
    seconds: float = 0.0
    words_per_s: float | None = None
    error: str = ""  # why it failed; for an ok point, a note (e.g. it overran while exiting)
    log: Path | None = None
    record: dict[str, Any] | None = None


@dataclass
class SweepResult:
    """All outcomes, in launch order."""

    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "failed"]


# --- parsing and planning (nothing launches here) -----------------------------------------

def parse_np(text: str) -> list[int]:
    """``"1,2,4"`` -> ``[1, 2, 4]`` (sorted, without repeats).

    Raises:
        HvdscaleError: an empty list or an entry that is not a positive integer.
    """
    items = [t.strip() for t in str(text).split(",")]
    if not any(items):
        raise HvdscaleError("--np needs a comma-separated list of positive rank counts, "
                            "e.g. --np 1,2,4 (got an empty list)")
    out = set()
    for t in items:
        if not t.isdigit() or int(t) < 1:
            raise HvdscaleError(f"--np entries must be positive integers, e.g. --np 1,2,4 "
                                f"(got {t!r} in {text!r})")
        out.add(int(t))
    return sorted(out)


def _parse_names(text: str, known: tuple[str, ...], option: str, what: str) -> list[str]:
    """Comma-separated names from ``known``, in the given order, without repeats.

    Raises:
        HvdscaleError: an empty list or a name not in ``known``, naming ``option``.
    """
    out: list[str] = []
    for t in (s.strip() for s in str(text).split(",")):
        if t not in known:
            raise HvdscaleError(f"{option}: unknown {what} {t!r}; choose from "
                                f"{', '.join(known)}")
        if t not in out:
            out.append(t)
    return out


def parse_strategies(text: str) -> list[str]:
    """``"horovod,ps"`` -> ``["horovod", "ps"]`` (given order, without repeats)."""
    return _parse_names(text, STRATEGIES, "--strategies", "strategy")


def parse_frameworks(text: str) -> list[str]:
    """``"torch,tf"`` -> ``["torch", "tf"]`` (given order, without repeats)."""
    from hvdscale.frameworks import FRAMEWORKS

    return _parse_names(text, FRAMEWORKS, "--frameworks", "framework")


def _local_slots(launcher: str, env: Mapping[str, str]) -> tuple[int, str]:
    """Ranks a launch without a hostfile can hold here, and where that number comes from."""
    if env.get("SLURM_JOB_ID"):
        # Inside an allocation srun and mpirun both place ranks on the allocation's tasks.
        ntasks = env.get("SLURM_NTASKS") or env.get("SLURM_NPROCS") or ""
        if ntasks.isdigit() and launcher != "horovodrun":
            return int(ntasks), f"the SLURM allocation's SLURM_NTASKS={ntasks}"
    from hvdscale.core.threads import cores_on_host

    n = cores_on_host()
    return n, f"this host's {n} cores"


def plan_sweep(config: str | Path, np: str | list[int], strategies: str | list[str],
               launcher: str = "mpirun", hostfile: str | Path | None = None,
               out: str | Path = "results", overrides: list[str] | tuple[str, ...] = (),
               network_interfaces: str | None = None, launcher_args: str | list[str] = (),
               timeout_s: float = 900.0, redo: bool = False,
               env: Mapping[str, str] | None = None, check_out: bool = True,
               frameworks: str | list[str] | None = None,
               progress_every: float | None = None) -> SweepSpec:
    """Check every input of a sweep and list its points; launches nothing.

    Args:
        config: YAML run config.
        np: rank counts, as a list or ``"1,2,4"``.
        strategies: strategy names, as a list or ``"horovod,ps,independent"``.
        launcher: ``mpirun``, ``horovodrun`` or ``srun``.
        hostfile: ``HOST slots=N`` file (mpirun and horovodrun only).
        out: results directory.
        overrides: ``--set key=value`` strings applied to every point.
        network_interfaces: NIC name(s) the ranks talk over (mpirun and horovodrun).
        launcher_args: extra launcher arguments (a shell-quoted string or a list).
        timeout_s: time limit of one point.
        redo: launch points even when an ok record exists.
        env: environment to judge SLURM and PATH by (default: ``os.environ``).
        check_out: prove the results directory writable.
        frameworks: frameworks to run each point in (``"torch,tf"``); None: the config's.
        progress_every: seconds between the progress lines each point writes to its log.

    Returns:
        The validated sweep.

    Raises:
        HvdscaleError: one clear message for the first bad input.
    """
    env = os.environ if env is None else env
    if launcher not in LAUNCHERS:
        raise HvdscaleError(f"unknown launcher {launcher!r}; choose from {', '.join(LAUNCHERS)}")
    nps = parse_np(",".join(map(str, np)) if isinstance(np, list) else np)
    names = parse_strategies(",".join(strategies) if isinstance(strategies, list) else strategies)
    if not isinstance(timeout_s, int | float) or timeout_s <= 0:
        raise HvdscaleError(f"--timeout must be a positive number of seconds (got {timeout_s})")
    cfg_path = Path(config)
    if frameworks is None:
        fws = [load_config(cfg_path, list(overrides)).framework]
    else:
        fws = parse_frameworks(",".join(frameworks) if isinstance(frameworks, list)
                               else frameworks)
    cfgs = {(f, s): load_config(cfg_path, [*overrides, f"framework={f}", f"strategy.name={s}"])
            for f in fws for s in names}

    hosts = None
    if hostfile is not None:
        if launcher == "srun":
            raise HvdscaleError("--hostfile does not apply to srun, which places ranks on the "
                                "SLURM allocation; use --launcher mpirun or horovodrun with it")
        hosts = parse_hostfile(hostfile)
        hosts.check_ranks(max(nps))
    elif launcher != "srun" or env.get("SLURM_JOB_ID"):
        # (srun outside an allocation asks SLURM for one, which decides where the ranks fit.)
        slots, where = _local_slots(launcher, env)
        if max(nps) > slots:
            fix = (f"pass --hostfile with enough slots (e.g. 'localhost slots={max(nps)}' to "
                   "oversubscribe on purpose)")
            if "SLURM" in where:
                fix = "ask for more tasks (sbatch --ntasks) or lower --np"
            raise HvdscaleError(f"--np {max(nps)} is more ranks than {where}; {fix}")
    if shutil.which(launcher, path=env.get("PATH")) is None:
        raise HvdscaleError(f"launcher {launcher!r} is not on PATH")
    try:
        extra = (shlex.split(launcher_args) if isinstance(launcher_args, str)
                 else list(launcher_args))
    except ValueError as e:
        raise HvdscaleError(f"--launcher-args {launcher_args!r} cannot be split: {e}") from None
    # What every rank would refuse at start-up is refused here, before any launch: a point
    # that cannot run is a bad plan, not a failed measurement.
    for (f, s), c in cfgs.items():
        data.check_files(c.data, c.model.kind)
        for n in nps:
            try:
                check_launch(c, n, mpi=True)  # every launcher here starts an MPI job
            except HvdscaleError as e:
                raise HvdscaleError(f"point {f} {s} np={n}: {e}") from None
    if check_out:
        check_writable(out)
    points = []
    for n in nps:  # every point at one rank count, smallest first: baselines come first
        for f in fws:
            for s in names:
                points.append(Point(len(points) + 1, s, n, cfgs[f, s]))
    return SweepSpec(config=cfg_path.resolve(), overrides=tuple(overrides), points=tuple(points),
                     launcher=launcher, out=Path(out).resolve(), hostfile=hosts,
                     network_interfaces=network_interfaces, launcher_args=tuple(extra),
                     timeout_s=float(timeout_s), redo=redo, progress_every=progress_every)


# --- records --------------------------------------------------------------------------------

def point_workers(cfg: RunConfig, ranks: int) -> int:
    """Ranks that compute: all, except a dedicated parameter server's serve-only ranks."""
    ps = cfg.strategy.ps
    if cfg.strategy.name == "ps" and ps.placement == "dedicated":
        return max(0, ranks - ps.num_servers)
    return ranks


def _matches(rec: dict[str, Any], point: Point) -> bool:
    # The same experiment and series at the same ranks (hvdscale.records.experiment): a changed
    # setting that changes the measurement (steps, batch, model) is a new point; a label
    # (name, supervision limits) is not.
    return same_point(rec, to_dict(point.cfg), point.ranks)


def recorded_all(records: list[dict[str, Any]], point: Point) -> list[dict[str, Any]]:
    """Every ok record of ``point`` among ``records``, oldest first."""
    return [r for r in records if r.get("status") == "ok" and _matches(r, point)]


def recorded(records: list[dict[str, Any]], point: Point) -> dict[str, Any] | None:
    """The latest ok record of ``point`` among ``records``, or None."""
    hits = recorded_all(records, point)
    return hits[-1] if hits else None


def read_out(out: Path) -> list[dict[str, Any]]:
    """The records in the results directory ``out`` (none yet: an empty list)."""
    return read_records(results_path(out)) if results_path(out).exists() else []


# --- launch commands ---------------------------------------------------------------------------

def run_argv(spec: SweepSpec, point: Point) -> list[str]:
    """The ``hvdscale run`` command every rank of ``point`` executes."""
    sets = [a for o in (*spec.overrides, *point.sets) for a in ("--set", o)]
    if spec.progress_every is not None:
        sets += ["--progress-every", f"{spec.progress_every:g}"]
    # The interpreter running the sweep runs the ranks too (same install on every host);
    # framework and strategy.name come last so they win over a --set of them.
    return [sys.executable, "-m", "hvdscale", "run", str(spec.config), *sets,
            "--set", f"framework={point.cfg.framework}",
            "--set", f"strategy.name={point.strategy}", "--out", str(spec.out)]


def _exports(env: Mapping[str, str]) -> list[str]:
    names = sorted(k for k in env if k in EXPORT_VARS or k.startswith(EXPORT_PREFIXES))
    return [a for k in names for a in ("-x", k)]


def launcher_prefix(launcher: str, ranks: int, hostfile_path: Path | None = None,
                    network_interfaces: str | None = None, launcher_args: tuple[str, ...] = (),
                    gloo: bool = False, env: Mapping[str, str] | None = None) -> list[str]:
    """The launcher part of a command line that starts ``ranks`` copies of a program.

    Shared by the sweep's points and by other multi-rank commands (``hvdscale commbench``).

    Args:
        launcher: ``mpirun``, ``horovodrun`` or ``srun``.
        ranks: number of ranks.
        hostfile_path: a clean ``HOST slots=N`` hostfile (see ``write_hostfile``).
        network_interfaces: NIC name(s) the ranks talk over.
        launcher_args: extra launcher arguments, placed last.
        gloo: horovodrun only: Horovod's Gloo controller (no MPI job) instead of ``--mpi``.
        env: environment whose variables mpirun forwards with ``-x``.
    """
    env = os.environ if env is None else env
    n = str(ranks)
    nics = network_interfaces
    if launcher == "mpirun":
        # Same placement as horovodrun's: no binding (each rank's compute, Horovod and MPI
        # progress threads share the host's cores), ranks filled host by host.
        cmd = ["mpirun", "-np", n, "--bind-to", "none", "--map-by", "slot"]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        if hostfile_path is not None:
            cmd += ["--hostfile", str(hostfile_path)]
        if nics:
            cmd += ["--mca", "btl_tcp_if_include", nics, "--mca", "oob_tcp_if_include", nics]
        cmd += _exports(env)
    elif launcher == "horovodrun":
        # --mpi: the ps strategy and the harness's barriers need an MPI job (not --gloo).
        cmd = ["horovodrun", "--gloo" if gloo else "--mpi", "-np", n]
        if hostfile_path is not None:
            cmd += ["-hostfile", str(hostfile_path)]
        else:
            cmd += ["-H", f"localhost:{n}"]
        if nics:
            # Without it horovodrun probes every host for a common routable interface.
            cmd += ["--network-interfaces", nics]
    else:
        cmd = ["srun", "--mpi=pmix", "-n", n, "--kill-on-bad-exit=1", "--cpu-bind=none"]
    return [*cmd, *launcher_args]


def launch_command(spec: SweepSpec, point: Point, hostfile_path: Path | None = None,
                   env: Mapping[str, str] | None = None) -> list[str]:
    """The launcher command line of ``point``.

    Args:
        spec: the sweep.
        point: the point to launch.
        hostfile_path: the clean copy of the sweep's hostfile (see ``write_hostfile``).
        env: environment whose variables mpirun forwards with ``-x``.
    """
    return [*launcher_prefix(spec.launcher, point.ranks, hostfile_path, spec.network_interfaces,
                             spec.launcher_args, env=env), *run_argv(spec, point)]


def launch_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment of the launcher process: unbuffered ranks, root allowed when root."""
    out = dict(os.environ if env is None else env)
    out.setdefault("PYTHONUNBUFFERED", "1")
    if os.geteuid() == 0:
        # horovodrun's own `mpirun --version` probe and nested launches need these too.
        out.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        out.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return out


# --- running -----------------------------------------------------------------------------------

def _kill_tree(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """End a launch: its process group and every descendant, TERM first, then KILL."""
    import psutil

    try:
        family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        family = []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        for p in family:  # launchers may start helpers in their own process groups
            try:
                p.send_signal(sig)
            except psutil.NoSuchProcess:
                pass
        try:
            proc.wait(timeout=grace_s)
            _, alive = psutil.wait_procs(family, timeout=1.0)
            if not alive:
                return
        except subprocess.TimeoutExpired:
            continue


def error_summary(stderr: str, max_lines: int = 3) -> str:
    """The last telling lines of a failed launch's stderr, joined on one line."""
    lines = [ln.strip() for ln in stderr.splitlines()]
    lines = [re.sub(r"^\[\d+,\d+\]<std(err|out)>:", "", ln).strip() for ln in lines]
    lines = [ln for ln in lines if ln and not _BOILERPLATE.match(ln)]
    # hvdscale's fail-fast prints "hvdscale: error: ..." once; that line says it all.
    errs = [ln for ln in lines if "hvdscale: error" in ln or "Error:" in ln or "error:" in ln]
    pick = errs[-1:] if errs else lines[-max_lines:]
    return " / ".join(pick)[:500] or "(no stderr)"


def _log_base(spec: SweepSpec, point: Point) -> Path:
    name = re.sub(r"[^\w.-]", "-", point.cfg.name)
    tag = re.sub(r"[^\w.-]", "-", point.name) if point.name else point.strategy
    return spec.out / "logs" / f"{name}_{point.cfg.framework}_{tag}_np{point.ranks}"


def run_launch(cmd: list[str], env: Mapping[str, str], timeout_s: float, out_log: Path,
               err_log: Path) -> tuple[int | None, bool]:
    """Run one launch (its command line first in ``out_log``) with a time limit.

    Returns:
        (exit code, whether the time limit ended it). The launch and all its ranks are ended
        together on the time limit or on any exception here (Ctrl-C).
    """
    timed_out = False
    with open(out_log, "wb") as fo, open(err_log, "wb") as fe:
        fo.write(("$ " + shlex.join(cmd) + "\n").encode())
        fo.flush()
        # Own session: a time limit or Ctrl-C ends the launcher and all its ranks together.
        proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL,
                                env=dict(env), start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_tree(proc)
            rc = proc.returncode
        except BaseException:
            _kill_tree(proc, grace_s=5.0)
            raise
    return rc, timed_out


def run_point(spec: SweepSpec, point: Point, hostfile_path: Path | None = None) -> Outcome:
    """Launch one point, wait for it (up to the time limit), and record a failure."""
    base = _log_base(spec, point)
    base.parent.mkdir(parents=True, exist_ok=True)
    cmd = launch_command(spec, point, hostfile_path)
    env = launch_env()
    before = len(read_out(spec.out))
    started = datetime.now(UTC).isoformat(timespec="seconds")
    t0 = time.monotonic()
    out_log, err_log = base.with_suffix(".stdout"), base.with_suffix(".stderr")
    rc, timed_out = run_launch(cmd, env, spec.timeout_s, out_log, err_log)
    seconds = time.monotonic() - t0
    new = read_out(spec.out)[before:]
    rec = next((r for r in reversed(new) if r.get("status") == "ok" and _matches(r, point)),
               None)
    if rec is not None:
        # The record is written after the last barrier, when every rank has finished: the
        # measurement is complete even if the launch overran its limit while exiting.
        late = (f" (record written; the launch then overran --timeout {spec.timeout_s:g} s "
                "while exiting and was ended)") if timed_out else ""
        return Outcome(point, "ok", seconds, rec["words_per_s"], error=late.strip(), log=out_log,
                       record=rec)
    stderr = err_log.read_text(errors="replace")
    if timed_out:
        error = f"timed out after {spec.timeout_s:g} s (no record written); ended the launch"
    elif rc == 0:
        error = "launch exited 0 but wrote no record: " + error_summary(stderr)
    else:
        error = f"exit {rc}: " + error_summary(stderr)
    append_record(spec.out, {
        "schema": 1, "status": "failed", "name": point.cfg.name, "started": started,
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "key": record_key(point.cfg), "ranks": point.ranks,
        "workers": point_workers(point.cfg, point.ranks), "config": to_dict(point.cfg),
        "launcher": spec.launcher, "command": cmd, "returncode": rc, "timed_out": timed_out,
        "seconds": round(seconds, 3), "error": error,
        "stderr_tail": stderr.splitlines()[-20:], "log": str(err_log)})
    return Outcome(point, "failed", seconds, error=error, log=err_log)


def time_left(launched: list[Outcome], remaining: list[Point]) -> float | None:
    """Estimated seconds for the ``remaining`` points, from the points ``launched`` so far.

    A point is expected to take as long as the launched points with its rank count took on
    average (start-up and step time grow with the ranks on a host), or, for a rank count not
    launched yet, as long as all launched points on average. None before any launch.
    """
    if not launched:
        return None
    overall = sum(o.seconds for o in launched) / len(launched)
    by_ranks: dict[int, list[float]] = {}
    for o in launched:
        by_ranks.setdefault(o.point.ranks, []).append(o.seconds)
    return sum(sum(by_ranks[p.ranks]) / len(by_ranks[p.ranks]) if p.ranks in by_ranks
               else overall for p in remaining)


def run_sweep(spec: SweepSpec, say: Callable[[str], None] = print) -> SweepResult:
    """Run every point of ``spec`` in order, one progress line per point, each with the
    sweep's estimated time left once a point has been measured."""
    from hvdscale.core.progress import format_duration

    result = SweepResult()
    total = len(spec.points)
    t0 = time.monotonic()
    records = read_out(spec.out)
    # Points to launch (the others are skipped as recorded): what the time left is made of.
    todo = [p for p in spec.points if spec.redo or recorded(records, p) is None]
    launched: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="hvdscale-sweep-") as tmp:
        hf = write_hostfile(spec.hostfile, Path(tmp) / "hostfile") if spec.hostfile else None
        for point in spec.points:
            head = f"[{point.index}/{total}] {point.label}"
            done = None if spec.redo else recorded(read_out(spec.out), point)
            if done is not None:
                o = Outcome(point, "skipped", 0.0, done["words_per_s"])
                say(f"{head}: skipped, already recorded {o.words_per_s:.1f} words/s "
                    f"(--redo measures it again)")
            else:
                o = run_point(spec, point, hf)
                launched.append(o)
                elapsed = time.monotonic() - t0
                rest = [p for p in todo if p.index > point.index]
                left = time_left(launched, rest) if rest else None
                when = f"elapsed {elapsed:.0f} s" + (
                    f", sweep ~{format_duration(left)} left" if left is not None else "")
                if o.status == "ok":
                    say(f"{head}: ok {o.words_per_s:.1f} words/s in {o.seconds:.1f} s ({when})"
                        f"{' ' + o.error if o.error else ''}")
                else:
                    say(f"{head}: FAILED after {o.seconds:.1f} s ({when}): "
                        f"{o.error} [log: {o.log}]")
            result.outcomes.append(o)
    return result


def dry_run(spec: SweepSpec, say: Callable[[str], None] = print) -> None:
    """Print each point's launch command; launch nothing."""
    hf = spec.hostfile.path if spec.hostfile else None  # the launch uses a clean copy of it
    for point in spec.points:
        say(f"[{point.index}/{len(spec.points)}] {point.label}: "
            f"{shlex.join(launch_command(spec, point, hf))}")
