"""Planning a sweep (nothing launches here): its points, checked completely before the first
launch (the config with every strategy applied, the rank counts, the launcher, the hostfile's
slots), and which recorded runs measured a point.

Bad input therefore costs one error line and leaves earlier results as they were.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hvdscale import registry as strategies
from hvdscale.config import RunConfig, check_launch, load_config, to_dict
from hvdscale.corpora import corpus
from hvdscale.errors import HvdscaleError
from hvdscale.records.experiment import same_point
from hvdscale.records.fields import Record
from hvdscale.records.run import RunRecord
from hvdscale.records.store import check_writable
from hvdscale.registry import FRAMEWORKS
from hvdscale.study.paired.rounds import ROUND_SUFFIX, by_round
from hvdscale.study.sweep.grid import (
    SCALE_LR,
    Axis,
    axes_of,
    combination_name,
    combinations,
    describe_grid,
    load_point_config,
)
from hvdscale.study.sweep.hostfile import Hostfile
from hvdscale.study.sweep.launcher import check_launcher, place_ranks, split_launcher_args
from hvdscale.study.sweep.names import parse_names


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
    repeats: int = 1
    """Interleaved rounds: round r launches every point once before round r+1 starts."""
    launch_per_point: bool = False
    """Every point in a launch of its own (``--launch-per-point``) instead of one launch per
    round for the points that can share one (hvdscale.study.sweep.groups)."""
    grid: str = ""
    """The grid's axes and values, as ``--dry-run`` prints them."""
    first_round: int = 0
    """Rounds below this one are left as they are (``--decide`` adds round ``first_round`` for
    the points still needed, and must not fill a round it skipped for the others)."""


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
    repeats: int = 1
    """Interleaved rounds of every point (``--repeats``)."""
    scale_lr: str | list[str] | None = None
    """Learning-rate rules to run each point under (``"none,linear,sqrt"``, ``--scale-lr``,
    one more sweep axis); None: the config's ``optim.scale_lr``."""
    launch_per_point: bool = False
    """A launch per point (``--launch-per-point``) instead of one per round."""
    axes: Sequence[str] = ()
    """``--axis KEY=V,V,...`` strings: config keys the grid varies (a product)."""


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
    return parse_names(text, strategies.names(), "--strategies", "strategy")


def parse_frameworks(text: str) -> list[str]:
    """``"torch,tf"`` -> ``["torch", "tf"]`` (given order, without repeats)."""
    return parse_names(text, FRAMEWORKS, "--frameworks", "framework")


def grid_points(req: SweepRequest, pairs: list[tuple[str, str]], nps: list[int],
                cfgs: dict[tuple[str, str], RunConfig]) -> tuple[list[Point], list[Axis]]:
    """Every point of the grid (``hvdscale.study.sweep.grid``), smallest rank count first, each
    (framework, strategy) once per combination of the config axes; and those axes."""
    axes = axes_of(list(req.axes), None if req.scale_lr is None else _joined(req.scale_lr))
    if any(a.key == SCALE_LR for a in axes):
        scaling = {c.data.scaling for c in cfgs.values()}
        if scaling != {"weak"}:
            raise HvdscaleError("--scale-lr compares rules that act under weak scaling only "
                                "(strong scaling keeps the global batch, so every rule keeps "
                                f"lr): set data.scaling=weak (got {', '.join(sorted(scaling))})")
    combos = combinations(axes)
    loaded = {(f, s, sets): cfgs[f, s] if not sets else load_point_config(
        Path(req.config), req.overrides, sets, f, s) for f, s in pairs for sets in combos}
    points = []
    for n in nps:
        for f, s in pairs:
            for sets in combos:
                points.append(Point(len(points) + 1, s, n, loaded[f, s, sets], sets,
                                    combination_name(s, axes, sets)))
    return points, axes


def _joined(value: str | list[Any]) -> str:
    """An option given as a list, as the comma-separated text its parser reads."""
    return ",".join(map(str, value)) if isinstance(value, list) else value


def _check_points(cfgs: Mapping[tuple[str, str], RunConfig], nps: list[int],
                  launch: str | bool = True) -> None:
    """Refuse here what every rank would refuse at start-up, before any launch: a point that
    cannot run is a bad plan, not a failed measurement. ``launch``: ``torchrun``, or True (the
    other launchers here start an MPI job)."""
    for (f, s), c in cfgs.items():
        corpus.check_files(c.data, c.model.data_kind)
        for n in nps:
            try:
                check_launch(c, n, mpi=launch)
            except HvdscaleError as e:
                raise HvdscaleError(f"point {f} {s} np={n}: {e}") from None


DEFAULT_TARGET = "measure.target_rel_ci=0.02"
"""A sweep's points measure until words/s is known to +-2% (95%) unless the config says how
long to measure: each point's start-up is paid once per launch now, so its measured time can
be what the figure needs rather than a fixed step count."""
_LENGTH_KEYS = ("steps", "target_rel_ci", "epochs", "until")


def default_overrides(cfg_path: Path, overrides: Sequence[str]) -> tuple[str, ...]:
    """``overrides`` with ``DEFAULT_TARGET`` first when neither the config's ``measure`` section
    nor a ``--set`` names how long to measure (``steps``, ``target_rel_ci``, ``epochs``,
    ``until``)."""
    import yaml

    try:
        raw = yaml.safe_load(cfg_path.read_text(encoding="utf-8")) or {}
    except (OSError, ValueError, yaml.YAMLError):
        return tuple(overrides)  # load_config names what is wrong with the file
    measure = raw.get("measure") if isinstance(raw, dict) else None
    named = set(measure) if isinstance(measure, dict) else set()
    named |= {o.split("=", 1)[0].strip().split(".")[1] for o in overrides
              if o.strip().startswith("measure.") and "." in o.split("=", 1)[0]}
    return tuple(overrides) if named & set(_LENGTH_KEYS) else (DEFAULT_TARGET, *overrides)


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
    if isinstance(req.repeats, bool) or not isinstance(req.repeats, int) or req.repeats < 1:
        raise HvdscaleError(f"--repeats must be a whole number of rounds >= 1 "
                            f"(got {req.repeats!r})")
    if not isinstance(req.timeout_s, int | float) or req.timeout_s <= 0:
        raise HvdscaleError(f"--timeout must be a positive number of seconds "
                            f"(got {req.timeout_s})")
    cfg_path = Path(req.config)
    req = replace(req, overrides=default_overrides(cfg_path, req.overrides))
    if req.frameworks is None:
        fws = [load_config(cfg_path, list(req.overrides)).framework]
    else:
        fws = parse_frameworks(_joined(req.frameworks))
    pairs = [(f, s) for f in fws for s in names
             if len(fws) == 1 or f in strategies.get(s).frameworks]
    cfgs = {(f, s): load_config(cfg_path, [*req.overrides, f"framework={f}",
                                           f"strategy.name={s}"])
            for f, s in pairs}
    hosts = place_ranks(req.launcher, max(nps), req.hostfile, env)
    extra = split_launcher_args(req.launcher_args)
    _check_points(cfgs, nps, "torchrun" if req.launcher == "torchrun" else True)
    if check_out:
        check_writable(req.out)
    # Every point at one rank count, smallest first: baselines come first.
    points, axes = grid_points(req, pairs, nps, cfgs)
    return SweepSpec(config=cfg_path.resolve(), overrides=tuple(req.overrides),
                     points=tuple(points), launcher=req.launcher, out=Path(req.out).resolve(),
                     hostfile=hosts, network_interfaces=req.network_interfaces,
                     launcher_args=extra, timeout_s=float(req.timeout_s), redo=req.redo,
                     progress_every=req.progress_every, repeats=req.repeats,
                     launch_per_point=bool(req.launch_per_point),
                     grid=describe_grid(nps, pairs, axes))


# --- records --------------------------------------------------------------------------------

def point_workers(cfg: RunConfig, ranks: int) -> int:
    """Ranks that compute (``StrategyConfig.workers``)."""
    return cfg.strategy.workers(ranks)


def matches(rec: RunRecord, point: Point) -> bool:
    """Whether ``rec`` measured ``point``."""
    # The same experiment and series at the same ranks (hvdscale.records.experiment): a changed
    # setting that changes the measurement (steps, batch, model) is a new point; a label
    # (name, supervision limits) is not.
    return same_point(rec.config, rec.ranks, to_dict(point.cfg), point.ranks)


def recorded_all(records: Sequence[Record], point: Point) -> list[RunRecord]:
    """Every ok record of ``point`` among ``records``, oldest first."""
    return [r for r in records if isinstance(r, RunRecord) and matches(r, point)]


def recorded(records: Sequence[Record], point: Point) -> RunRecord | None:
    """The latest ok record of ``point`` among ``records``, or None."""
    hits = recorded_all(records, point)
    return hits[-1] if hits else None


def round_point(point: Point, r: int) -> Point:
    """``point``'s launch in round ``r`` (0-based): its name tagged ``-round<r+1>``."""
    name = f"{point.cfg.name}{ROUND_SUFFIX}{r + 1}"
    return replace(point, cfg=replace(point.cfg, name=name), sets=(*point.sets, f"name={name}"))


def rounds_of(records: Sequence[Record], point: Point, repeats: int) -> list[RunRecord | None]:
    """``point``'s ok record per round among ``records``
    (``hvdscale.study.paired.rounds.by_round``);
    any round's ``round_point`` of it matches the same records."""
    return by_round(recorded_all(list(records), point), repeats)


def in_round(spec: SweepSpec, point: Point, r: int) -> Point:
    """``point`` as round ``r`` runs it (tagged with its round when the sweep has several)."""
    return point if spec.repeats == 1 else round_point(point, r)


def point_sets(spec: SweepSpec, point: Point) -> list[str]:
    """The ``--set`` overrides that make ``point``'s config from the sweep's (framework and
    strategy last, so they win over a --set of them)."""
    return [*spec.overrides, *point.sets, f"framework={point.cfg.framework}",
            f"strategy.name={point.strategy}"]
