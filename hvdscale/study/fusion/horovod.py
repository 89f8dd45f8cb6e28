"""``hvdscale fusion``: which Horovod settings make this config fastest here, and by how much.

Every (fusion threshold, cycle time, overlap mode) point is a point of the sweep's one driver
(``hvdscale.study.sweep.driver.run_sweep``: same launchers, logs, time limit, failed-point
records, skip of what is recorded); what is this module's own is the grid's reference points,
the autotuner's launch and the analysis. Repeats are interleaved: round r launches every point once
before round r+1 starts, so slow phases of a shared machine hit all points alike, and ratios
are taken per round (paired); each launch's record is tagged with its round
(``hvdscale.study.paired.rounds``), so a failed launch leaves its round empty instead of shifting
the later ones. Horovod's defaults (128 MiB, 1 ms, hooks: verified in 0.28.1's
``horovod/common/operations.cc``), fusion off and, optionally, Horovod's autotuner's choice and
independent replicas are measured the same way.
Each launch also captures a few steps of Horovod's timeline after its measured window,
summarised per point (allreduce time, fused buffers).

Outputs in the results directory (``hvdscale.study.fusion.report``): ``fusion.md`` (table and
recommendation), ``fusion.json``, ``fusion_heatmap.png``; records in ``results.jsonl``, timelines
in ``timelines/``, autotune logs in ``autotune/``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hvdscale.config import load_config
from hvdscale.errors import HvdscaleError
from hvdscale.study.fusion.report import analyze
from hvdscale.study.fusion.settings import Setting, grid_settings, parse_floats, parse_overlaps
from hvdscale.study.sweep.driver import run_sweep
from hvdscale.study.sweep.launcher import read_out
from hvdscale.study.sweep.plan import (
    Point,
    SweepRequest,
    SweepSpec,
    plan_sweep,
    recorded,
    rounds_of,
)

DEFAULT_THRESHOLDS = "0,1,4,16,64,128"
DEFAULT_CYCLES = "0.5,1,2,5,10"
DEFAULT_OVERLAPS = "hooks,after-backward"


@dataclass(frozen=True)
class FusionGrid:
    """What a fusion sweep measures, as asked for: the rank count, the grid's lists (as the
    command's comma-separated text), the rounds and what each launch adds."""

    np: int
    """Ranks of every launch (>= 2)."""
    thresholds: str = DEFAULT_THRESHOLDS
    """Fusion thresholds in MiB (0: fusion off)."""
    cycles: str = DEFAULT_CYCLES
    """Cycle times in ms."""
    overlaps: str = DEFAULT_OVERLAPS
    """Overlap modes."""
    repeats: int = 3
    """Interleaved rounds."""
    timeline_steps: int = 3
    """Steps of Horovod's timeline captured after each measured window (0: none)."""
    autotune: bool = True
    """Also one launch with Horovod's autotuner, and a point at its choice."""
    independent: bool = True
    """Also a point of independent replicas (the ceiling)."""
    autotune_steps_per_sample: int = 2
    """Steps of one autotuner sample."""
    autotune_bayes_samples: int = 8
    """The autotuner's Bayesian trials (after one warm-up trial)."""


@dataclass(frozen=True)
class FusionSpec:
    """A checked fusion sweep: the launch spec, its settings and how it is measured."""

    sweep: SweepSpec
    np: int
    settings: tuple[Setting, ...]
    repeats: int
    timeline_steps: int
    autotune: bool
    autotune_sets: tuple[str, ...]


def plan_fusion(config: str | Path, grid: FusionGrid, out: str | Path = "results/fusion",
                overrides: Sequence[str] = (), launcher: str = "mpirun",
                hostfile: str | Path | None = None, timeout_s: float = 900.0,
                check_out: bool = True) -> FusionSpec:
    """Check every input of a fusion sweep and list its points; launches nothing.

    Args:
        config: YAML run config.
        grid: what to measure.
        out: results directory.
        overrides: ``--set key=value`` strings applied to every point.
        launcher: ``mpirun``, ``horovodrun`` or ``srun``.
        hostfile: ``HOST slots=N`` file (mpirun and horovodrun only).
        timeout_s: time limit of one launch.
        check_out: prove the results directory writable.

    Raises:
        HvdscaleError: one clear message for the first bad input.
    """
    np, repeats, timeline_steps = grid.np, grid.repeats, grid.timeline_steps
    _check_counts(grid)
    ts = parse_floats(grid.thresholds, "--threshold-mb", positive=False)
    cs = parse_floats(grid.cycles, "--cycle-ms", positive=True)
    os_ = parse_overlaps(grid.overlaps)
    base_sets = list(overrides)
    if timeline_steps:
        base_sets += ["strategy.horovod.timeline=auto",
                      f"strategy.horovod.timeline_steps={timeline_steps}"]
    spec = plan_sweep(SweepRequest(config, [np], ["horovod"], launcher=launcher,
                                   hostfile=hostfile, out=out, overrides=base_sets,
                                   timeout_s=timeout_s), check_out=check_out)
    cfg = spec.points[0].cfg
    if cfg.measure.epochs:
        raise HvdscaleError("hvdscale fusion measures a fixed step count; set measure.epochs=0")
    settings = grid_settings(ts, cs, os_, grid.independent,
                             grouped=cfg.strategy.horovod.num_groups > 1)
    return FusionSpec(replace(spec, points=()), np, tuple(settings), repeats, timeline_steps,
                      grid.autotune, _autotune_sets(grid, cfg.measure.warmup_steps))


def _check_counts(grid: FusionGrid) -> None:
    """The grid's rank count, rounds and timeline steps, or one clear error."""
    np, repeats, timeline_steps = grid.np, grid.repeats, grid.timeline_steps
    if not isinstance(np, int) or np < 2:
        raise HvdscaleError(f"--np must be a rank count >= 2 (Horovod has nothing to fuse on "
                            f"one rank; got {np!r})")
    if repeats < 1:
        raise HvdscaleError(f"--repeats must be >= 1 (got {repeats})")
    if timeline_steps < 0:
        raise HvdscaleError(f"--timeline-steps must be >= 0 (got {timeline_steps})")


def _autotune_sets(grid: FusionGrid, warmup_steps: int) -> tuple[str, ...]:
    """The settings of the launch with Horovod's autotuner, on top of the config's
    ``warmup_steps``.

    The autotuner runs warm-up trials, then Bayesian trials (+1), each 5 samples of
    steps_per_sample steps; it runs in the warm-up, so the window measures its choice.
    """
    warm = 1
    per_sample = grid.autotune_steps_per_sample
    trials = warm + grid.autotune_bayes_samples + 1
    tune_steps = int(trials * 5 * per_sample * 1.3) + warmup_steps
    return ("strategy.horovod.overlap=hooks", "strategy.horovod.autotune=true",
            "strategy.horovod.autotune_log=auto",
            f"strategy.horovod.autotune_steps_per_sample={per_sample}",
            f"strategy.horovod.autotune_warmup_samples={warm}",
            f"strategy.horovod.autotune_bayes_samples={grid.autotune_bayes_samples}",
            f"measure.warmup_steps={tune_steps}")


def _point(spec: FusionSpec, s: Setting, index: int, extra: tuple[str, ...] = (),
           name: str = "") -> Point:
    strategy = "independent" if s.kind == "independent" else "horovod"
    sets = (*s.sets(), *extra)
    cfg = load_config(spec.sweep.config, [*spec.sweep.overrides, *sets,
                                          f"strategy.name={strategy}"])
    return Point(index, strategy, spec.np, cfg, sets, name or s.label)


def points(spec: FusionSpec) -> list[tuple[Setting, Point]]:
    """Each setting's launch point (index in launch order within one round)."""
    return [(s, _point(spec, s, i)) for i, s in enumerate(spec.settings, 1)]


def autotune_point(spec: FusionSpec) -> Point:
    """The autotuner's launch: fusion and cycle time left to Horovod, tuned in the warm-up."""
    return _point(spec, Setting(None, None, "hooks", "autotune-run"), 0, spec.autotune_sets,
                  name="autotune-run")


def run_autotune(spec: FusionSpec, say: Callable[[str], None]) -> Setting | None:
    """One launch with HOROVOD_AUTOTUNE (or its earlier record), through the sweep's driver;
    returns its chosen setting."""
    p = autotune_point(spec)
    say(f"[autotune] {p.label}: Horovod's autotuner (log parsed when done)")
    run_sweep(replace(spec.sweep, points=(p,), repeats=1), say)
    rec = recorded(read_out(spec.sweep.out), p)
    if rec is None:
        say("[autotune] FAILED: no record (see the line above); skipping its point")
        return None
    tuned = rec.strategy.get("autotune") if rec is not None else None
    if not tuned:
        say("[autotune] the record holds no autotune log; skipping its point")
        return None
    chosen = tuned["chosen"]
    state = "finished" if tuned["finished"] else "NOT finished (last trial taken)"
    say(f"[autotune] {state}: {chosen['fusion_threshold_mb']:g} MiB, "
        f"{chosen['cycle_time_ms']:g} ms after {len(tuned['trials'])} trials "
        f"(log: {tuned['log']})")
    return Setting(round(chosen["fusion_threshold_mb"], 3), round(chosen["cycle_time_ms"], 3),
                   "hooks", "autotune")


def run_fusion(spec: FusionSpec, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Run (or resume) the fusion sweep, the autotuner's launch first, every setting's rounds
    through the sweep's driver (``run_sweep``: one launch per round where the settings may
    share one, rounds rotated, what is recorded skipped); returns the analysis."""
    autotune_info = run_autotune(spec, say) if spec.autotune else None
    settings = list(spec.settings)
    if autotune_info is not None:
        settings.insert(1 if settings and settings[0].kind == "independent" else 0,
                        autotune_info)
    spec = replace(spec, settings=tuple(settings))
    pts = points(spec)
    run_sweep(grid_sweep(spec, pts), say)
    result = analyze_out(spec, pts)
    result["autotune"] = autotune_info.label if autotune_info else None
    result["np"] = spec.np
    return result


def grid_sweep(spec: FusionSpec, pts: list[tuple[Setting, Point]]) -> SweepSpec:
    """What the sweep's driver runs (and ``--dry-run`` prints): the settings' points, rounds."""
    return replace(spec.sweep, points=tuple(p for _, p in pts), repeats=spec.repeats,
                   grid=f"np {spec.np} x settings {', '.join(s.label for s, _ in pts)}")


def analyze_out(spec: FusionSpec, pts: list[tuple[Setting, Point]]) -> dict[str, Any]:
    """The analysis (``fusion_report.analyze``) of the records in the results directory, each
    setting's records placed by the round they measured (a failed round stays empty)."""
    records = read_out(spec.sweep.out)
    return analyze([(s, rounds_of(records, p, spec.repeats)) for s, p in pts])
