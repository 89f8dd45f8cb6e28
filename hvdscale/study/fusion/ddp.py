"""``hvdscale fusion --strategy ddp``: DDP's analogue of the fusion sweep, its bucket size.

DDP's bucket schedule is its fusion model: gradients are packed, in the order backward makes
them ready, into buckets of ``bucket_cap_mb`` (the first one too: torch's 1 MiB first bucket
applies only when no size is given, and every point here gives one), and each bucket is
allreduced as soon as it is full. Every ``bucket_cap_mb`` is a point of the sweep's one driver
(``run_sweep``; the same as ``hvdscale sweep --axis strategy.ddp.bucket_cap_mb=...``), rounds
interleaved; DDP's default size (25 MiB) is the reference and the
recommendation is the same paired per-round rule as Horovod's (``hvdscale.study.paired.recommend``),
so a report can put "Horovod tuned" beside "DDP tuned".
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hvdscale.config import DDPConfig, load_config
from hvdscale.errors import HvdscaleError
from hvdscale.records.run import RunRecord
from hvdscale.study.fusion.report import paired, words_per_round
from hvdscale.study.fusion.settings import parse_floats
from hvdscale.study.paired.recommend import recommend
from hvdscale.study.sweep.driver import run_sweep
from hvdscale.study.sweep.launcher import read_out
from hvdscale.study.sweep.plan import (
    Point,
    SweepRequest,
    SweepSpec,
    plan_sweep,
    rounds_of,
)

DEFAULT_BUCKETS = "1,5,25,100"
DDP_DEFAULT_MB = DDPConfig().bucket_cap_mb
"""DDP's own default bucket size (25 MiB), passed explicitly: its first bucket is 25 MiB too."""


@dataclass(frozen=True)
class BucketSpec:
    """A checked bucket sweep: the launch spec, the bucket sizes and the rounds."""

    sweep: SweepSpec
    np: int
    buckets: tuple[float, ...]
    repeats: int
    independent: bool


def label(mb: float | None) -> str:
    """``"4MB"``; ``"defaults (25MB)"`` for DDP's own; ``"independent"`` for None."""
    if mb is None:
        return "independent"
    return f"defaults ({mb:g}MB)" if mb == DDP_DEFAULT_MB else f"{mb:g}MB"


def plan_buckets(config: str | Path, np: int, buckets: str, repeats: int,
                 sweep: SweepRequest, independent: bool = True) -> BucketSpec:
    """Check a bucket sweep and list its sizes (DDP's default always among them).

    Args:
        config: YAML run config (framework torch).
        np: ranks (>= 2).
        buckets: comma-separated sizes in MiB (> 0).
        repeats: interleaved rounds.
        sweep: the launch settings (launcher, hostfile, out, overrides, timeout).
        independent: also a point of independent replicas.

    Raises:
        HvdscaleError: one clear message for the first bad input.
    """
    if not isinstance(np, int) or np < 2:
        raise HvdscaleError(f"--np must be a rank count >= 2 (DDP has nothing to reduce on one "
                            f"rank; got {np!r})")
    if repeats < 1:
        raise HvdscaleError(f"--repeats must be >= 1 (got {repeats})")
    sizes = parse_floats(buckets, "--bucket-cap-mb", positive=True)
    if DDP_DEFAULT_MB not in sizes:
        sizes.append(DDP_DEFAULT_MB)
    req = SweepRequest(config, [np], ["ddp"], launcher=sweep.launcher, hostfile=sweep.hostfile,
                       out=sweep.out, overrides=list(sweep.overrides),
                       timeout_s=sweep.timeout_s)
    spec = plan_sweep(req)
    if spec.points[0].cfg.measure.epochs:
        raise HvdscaleError("hvdscale fusion measures a fixed step count; set measure.epochs=0")
    return BucketSpec(spec, np, tuple(sizes), repeats, independent)


def points(spec: BucketSpec) -> list[tuple[float | None, Point]]:
    """Each bucket size's launch point (None: independent replicas), in launch order."""
    sizes: list[float | None] = [*([None] if spec.independent else []), *spec.buckets]
    out = []
    for i, mb in enumerate(sizes, 1):
        strategy = "independent" if mb is None else "ddp"
        sets = () if mb is None else (f"strategy.ddp.bucket_cap_mb={mb:g}",)
        cfg = load_config(spec.sweep.config, [*spec.sweep.overrides, *sets,
                                              f"strategy.name={strategy}"])
        out.append((mb, Point(i, strategy, spec.np, cfg, sets, label(mb))))
    return out


def run_buckets(spec: BucketSpec, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Run (or resume) the rounds through the sweep's driver (``run_sweep``: one launch per
    round, rotated, what is recorded skipped); returns the analysis (``analyze``)."""
    pts = points(spec)
    run_sweep(grid_sweep(spec, pts), say)
    records = read_out(spec.sweep.out)
    res = analyze([(mb, rounds_of(records, p, spec.repeats)) for mb, p in pts])
    res["np"] = spec.np
    return res


def grid_sweep(spec: BucketSpec, pts: list[tuple[float | None, Point]]) -> SweepSpec:
    """What the sweep's driver runs (and ``--dry-run`` prints): the sizes' points, rounds."""
    return replace(spec.sweep, points=tuple(p for _, p in pts), repeats=spec.repeats,
                   grid=f"np {spec.np} x bucket_cap_mb {', '.join(label(mb) for mb, _ in pts)}")


def analyze(rows: Sequence[tuple[float | None, list[RunRecord | None]]]) -> dict[str, Any]:
    """Medians per bucket size; the recommendation (paired per-round ratios over DDP's
    default, the rule of ``hvdscale.study.paired.recommend``) and the best size's paired gains.
    Each row's records are indexed by round, None for a round whose launch failed."""
    table, recs_of = [], {}
    for mb, rounds in rows:
        recs = [r for r in rounds if r is not None]
        wps = [r.words_per_s for r in recs]
        recs_of[label(mb)] = rounds
        table.append({"label": label(mb), "bucket_cap_mb": mb, "repeats": len(recs),
                      "words_per_s": statistics.median(wps) if wps else None,
                      "words_per_s_all": words_per_round(rounds),
                      "buckets": _bucket_count(recs[0]) if recs else None,
                      "loadavg": [r.loadavg for r in recs]})
    ref = label(DDP_DEFAULT_MB)
    rec = recommend({r["label"]: r["words_per_s_all"] for r in table
                     if r["bucket_cap_mb"] is not None}, ref)
    pick = rec["recommended"] or ref
    out: dict[str, Any] = {"table": table, "recommendation": rec, "best": pick}
    if pick in recs_of and ref in recs_of:
        out["best_over_defaults"] = paired(recs_of[pick], recs_of[ref])
        if "independent" in recs_of:
            out["best_over_independent"] = paired(recs_of[pick], recs_of["independent"])
    return out


def _bucket_count(rec: RunRecord) -> int | None:
    sizes = rec.strategy.get("bucket_sizes")
    return len(str(sizes).split(",")) if sizes else None


def markdown(res: dict[str, Any], title: str) -> str:
    """The bucket sweep's table and recommendation."""
    lines = [f"# {title}\n", "|DDP bucket_cap_mb|Buckets|Rounds|Words/s (median)|Per round|",
             "|:--|:--|:--|:--|:--|"]
    for r in res["table"]:
        wps = "—" if r["words_per_s"] is None else f"{r['words_per_s']:.0f}"
        rounds = ", ".join("—" if w is None else f"{w:.0f}" for w in r["words_per_s_all"])
        lines.append(f"|{r['label']}|{r['buckets'] or '—'}|{r['repeats']}|{wps}|{rounds}|")
    lines.append(f"\nRecommendation: **{res['best']}** ({res['recommendation']['verdict']}).")
    g = res.get("best_over_defaults")
    if g:
        lines.append(f"Best over DDP's default: x{g['median']:.3f} (rounds {g['min']:.3f}-"
                     f"{g['max']:.3f}, n={g['n']}).")
    return "\n".join(lines) + "\n"


def write_outputs(res: dict[str, Any], out: Path, title: str) -> str:
    """``ddp_buckets.md`` and ``ddp_buckets.json`` in ``out``; returns the markdown."""
    md = markdown(res, title)
    (out / "ddp_buckets.md").write_text(md)
    (out / "ddp_buckets.json").write_text(json.dumps(res, indent=1, default=str))
    return md
