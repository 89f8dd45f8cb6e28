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
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hvdscale.config import STRATEGIES, RunConfig, check_launch, load_config, to_dict
from hvdscale.config.strategy import NATIVE_FRAMEWORK
from hvdscale.core import data
from hvdscale.errors import HvdscaleError
from hvdscale.records.experiment import same_point
from hvdscale.records.store import append_record, check_writable, record_key
from hvdscale.registry import FRAMEWORKS
from hvdscale.study.hostfile import Hostfile, write_hostfile
from hvdscale.study.launcher import (
    check_launcher,
    error_summary,
    launch_env,
    launcher_prefix,
    place_ranks,
    read_out,
    run_launch,
    split_launcher_args,
)
from hvdscale.study.names import parse_names


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
        """``"torch horovod np=2"``: framework, name or strategy, ranks."""
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
        """The outcomes that failed."""
        return [o for o in self.outcomes if o.status == "failed"]


# --- parsing and planning (nothing launches here) -----------------------------------------

@dataclass(frozen=True)
class SweepRequest:
    """A sweep as asked for (``hvdscale sweep``'s options), before :func:`plan_sweep` checks it."""

    config: str | Path
    """YAML run config."""
    np: str | list[int]
    """Rank counts, as a list or ``"1,2,4"``."""
    strategies: str | list[str]
    """Strategy names, as a list or ``"horovod,ps,independent"``."""
    launcher: str = "mpirun"
    """``mpirun``, ``horovodrun`` or ``srun``."""
    hostfile: str | Path | None = None
    """``HOST slots=N`` file (mpirun and horovodrun only)."""
    out: str | Path = "results"  # results directory
    overrides: Sequence[str] = ()
    """``--set key=value`` strings applied to every point."""
    network_interfaces: str | None = None
    """NIC name(s) the ranks talk over (mpirun and horovodrun)."""
    launcher_args: str | Sequence[str] = ()
    """Extra launcher arguments (a shell-quoted string or a list)."""
    timeout_s: float = 900.0  # time limit of one point
    redo: bool = False
    """Launch points even when an ok record exists."""
    frameworks: str | list[str] | None = None
    """Frameworks to run each point in (``"torch,tf"``); None: the config's."""
    progress_every: float | None = None
    """Seconds between the progress lines each point writes to its log."""


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


def parse_strategies(text: str) -> list[str]:
    """``"horovod,ps"`` -> ``["horovod", "ps"]`` (given order, without repeats)."""
    return parse_names(text, STRATEGIES, "--strategies", "strategy")


def parse_frameworks(text: str) -> list[str]:
    """``"torch,tf"`` -> ``["torch", "tf"]`` (given order, without repeats)."""
    return parse_names(text, FRAMEWORKS, "--frameworks", "framework")


def _joined(value: str | list[Any]) -> str:
    """An option given as a list, as the comma-separated text its parser reads."""
    return ",".join(map(str, value)) if isinstance(value, list) else value


def _check_points(cfgs: Mapping[tuple[str, str], RunConfig], nps: list[int]) -> None:
    """Refuse here what every rank would refuse at start-up, before any launch: a point that
    cannot run is a bad plan, not a failed measurement."""
    for (f, s), c in cfgs.items():
        data.check_files(c.data, c.model.data_kind)
        for n in nps:
            try:
                check_launch(c, n, mpi=True)  # every launcher here starts an MPI job
            except HvdscaleError as e:
                raise HvdscaleError(f"point {f} {s} np={n}: {e}") from None


def plan_sweep(req: SweepRequest, env: Mapping[str, str] | None = None,
               check_out: bool = True) -> SweepSpec:
    """Check every input of a sweep and list its points; launches nothing.

    Args:
        req: the sweep as asked for.
        env: environment to judge SLURM and PATH by (default: ``os.environ``).
        check_out: prove the results directory writable.

    Returns:
        The validated sweep.

    Raises:
        HvdscaleError: one clear message for the first bad input.
    """
    env = os.environ if env is None else env
    check_launcher(req.launcher)
    nps = parse_np(_joined(req.np))
    names = parse_strategies(_joined(req.strategies))
    if not isinstance(req.timeout_s, int | float) or req.timeout_s <= 0:
        raise HvdscaleError(f"--timeout must be a positive number of seconds "
                            f"(got {req.timeout_s})")
    cfg_path = Path(req.config)
    if req.frameworks is None:
        fws = [load_config(cfg_path, list(req.overrides)).framework]
    else:
        fws = parse_frameworks(_joined(req.frameworks))
    pairs = [(f, s) for f in fws for s in names if len(fws) == 1 or NATIVE_FRAMEWORK.get(s, f) == f]
    cfgs = {(f, s): load_config(cfg_path, [*req.overrides, f"framework={f}",
                                           f"strategy.name={s}"])
            for f, s in pairs}
    hosts = place_ranks(req.launcher, max(nps), req.hostfile, env)
    extra = split_launcher_args(req.launcher_args)
    _check_points(cfgs, nps)
    if check_out:
        check_writable(req.out)
    # Every point at one rank count, smallest first: baselines come first.
    points = [Point(i, s, n, cfgs[f, s])
              for i, (n, (f, s)) in enumerate(((n, fs) for n in nps for fs in pairs), 1)]
    return SweepSpec(config=cfg_path.resolve(), overrides=tuple(req.overrides),
                     points=tuple(points), launcher=req.launcher, out=Path(req.out).resolve(),
                     hostfile=hosts, network_interfaces=req.network_interfaces,
                     launcher_args=extra, timeout_s=float(req.timeout_s), redo=req.redo,
                     progress_every=req.progress_every)


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


def _log_base(spec: SweepSpec, point: Point) -> Path:
    name = re.sub(r"[^\w.-]", "-", point.cfg.name)
    tag = re.sub(r"[^\w.-]", "-", point.name) if point.name else point.strategy
    return spec.out / "logs" / f"{name}_{point.cfg.framework}_{tag}_np{point.ranks}"


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
    stderr, stdout = (f.read_text(errors="replace") if f.exists() else ""
                      for f in (err_log, out_log))
    if timed_out:
        error = f"timed out after {spec.timeout_s:g} s (no record written); ended the launch"
    else:
        why = error_summary(stderr, stdout=stdout)
        error = (f"exit {rc}: " if rc else "launch exited 0 but wrote no record: ") + why
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
