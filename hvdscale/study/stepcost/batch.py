"""``hvdscale batch``: the per-rank batch question, words/s at np=1 next to the GEMM curve.

Strong scaling divides a fixed global batch across ranks, so each rank runs a smaller batch.
For a config this runs one rank (``independent``, no communication) at each per-rank batch size,
through the sweep's own launch machinery (one launch per point, records in the results
directory, points already recorded are skipped), then times the RNN layer's GEMMs
(``hvdscale.study.stepcost.gemm``) at the config's hidden size and the same batch sizes, with the
run's thread count. Relative to the largest batch, the words/s column is the ceiling on a rank's
strong-scaling efficiency from compute alone when the largest batch is split into this size; the
GEMM column shows how much of that loss the matrix multiplies explain.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hvdscale.config import load_config, to_dict
from hvdscale.records.batch import BatchRecord
from hvdscale.records.study import LoadPair
from hvdscale.study.plotting import figure

STRATEGY = "independent"  # one rank, no communication: compute speed only
GEMM_REPEATS = 5  # timed repeats of each GEMM


def layer_gflops(rows: list[dict[str, Any]], batch: int) -> float:
    """GFLOP/s of one RNN layer's three GEMMs at ``batch``: they do equal work, so the layer's
    rate is the harmonic mean of NN, TN and NT."""
    g = [r["gflops"] for r in rows if r["batch"] == batch]
    return len(g) / sum(1.0 / x for x in g)


def run_batch_sweep(config: str, batches: list[int], overrides: list[str] | None = None,
                    out: str | Path = "results", launcher: str = "mpirun",
                    timeout_s: float = 900.0, redo: bool = False,
                    say: Callable[[str], None] = print) -> BatchRecord:
    """Run the np=1 point of each batch size, time the GEMMs, return the batch record.

    Raises:
        HvdscaleError: a bad config, batch list or launcher (before anything is launched).
    """
    from hvdscale.core.threads import resolve_threads
    from hvdscale.records.provenance import git_revision, versions
    from hvdscale.study.stepcost import gemm
    from hvdscale.study.sweep import driver, plan

    overrides = list(overrides or [])
    cfg = load_config(config, overrides)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = os.getloadavg()
    # Every point is planned (so checked) before the first launch.
    specs = [plan.plan_sweep(plan.SweepRequest(
        config, [1], [STRATEGY], launcher=launcher, out=out,
        overrides=[*overrides, f"data.batch_size={b}", f"name={cfg.name}-batch{b}"],
        timeout_s=timeout_s, redo=redo)) for b in batches]
    points = []
    for b, spec in zip(batches, specs, strict=True):
        say(f"hvdscale batch: per-rank batch {b}, np=1")
        (o,) = driver.run_sweep(spec, say).outcomes
        points.append({"batch": b, "status": "ok" if o.status != "failed" else "failed",
                       "words_per_s": o.words_per_s, "error": o.error})
    threads = resolve_threads(cfg.threads.intra_op, cfg.threads.inter_op, 1)[0]
    h = cfg.model.hidden_size
    say(f"hvdscale batch: GEMMs at hidden {h}, {threads} thread(s)")
    g = gemm.run_gemm([cfg.framework],
                      gemm.GemmSpec([h], batches, threads=threads, repeats=GEMM_REPEATS))
    res = g.frameworks[0]
    return BatchRecord(
        status="ok", started=started, finished=datetime.now(UTC).isoformat(timespec="seconds"),
        name=cfg.name, framework=cfg.framework, config=to_dict(cfg), strategy=STRATEGY,
        hidden=h, threads=threads, points=points,
        gemm={"peak": res["peak"], "rows": res["rows"], "gates": g.gates,
              "repeats": g.repeats},
        loadavg=LoadPair(before=list(load_before), after=list(os.getloadavg())),
        versions=versions(), git=git_revision())


def rows(rec: BatchRecord) -> list[dict[str, Any]]:
    """Per batch size: words/s and GEMM rate, each also relative to the largest batch."""
    ok = [p for p in rec.points if p["status"] == "ok" and p["words_per_s"]]
    if not ok:
        return []
    top = max(ok, key=lambda p: p["batch"])
    g_top = layer_gflops(rec.gemm["rows"], top["batch"])
    out = []
    for p in sorted(rec.points, key=lambda p: p["batch"]):
        g = layer_gflops(rec.gemm["rows"], p["batch"])
        by = {r["variant"]: r["gflops"] for r in rec.gemm["rows"] if r["batch"] == p["batch"]}
        wps = p["words_per_s"] if p["status"] == "ok" else None
        out.append({"batch": p["batch"], "words_per_s": wps,
                    "rel_words": wps / top["words_per_s"] if wps else None,
                    "gemm_gflops": g, "rel_gemm": g / g_top, **by})
    return out


def markdown(rec: BatchRecord) -> str:
    """The per-rank batch table: words/s at np=1 beside the GEMM rate."""
    lines = [f"## Per-rank batch: {rec.name} ({rec.framework}, hidden {rec.hidden}, "
             f"{rec.threads} thread(s), np=1 {rec.strategy}; loadavg "
             f"{rec.loadavg.before[0]:.2f})", "",
             "Relative = to the largest batch: splitting that batch so each rank holds this "
             "many sentences caps a rank's efficiency at the words/s column (compute alone); the "
             "GEMM column is the part the layer's matrix multiplies explain.", "",
             "|batch per rank|words/s|relative|layer GEMM GFLOP/s|relative|NN|TN|NT|",
             "|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows(rec):
        w = "failed" if r["words_per_s"] is None else f"{r['words_per_s']:.0f}"
        rw = "" if r["rel_words"] is None else f"{r['rel_words']:.2f}"
        lines.append(f"|{r['batch']}|{w}|{rw}|{r['gemm_gflops']:.1f}|{r['rel_gemm']:.2f}|"
                     f"{r['NN']:.1f}|{r['TN']:.1f}|{r['NT']:.1f}|")
    return "\n".join([*lines, ""])


def plot(rec: BatchRecord, out_dir: Path) -> Path:
    """words/s and the layer's GEMM GFLOP/s vs per-rank batch, both relative to the largest."""
    rs = rows(rec)
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in rec.name)
    path = out_dir / f"batch_{safe}.png"
    with figure(path, figsize=(6.5, 4.2)) as (_, ax):
        ok = [r for r in rs if r["rel_words"] is not None]
        ax.plot([r["batch"] for r in ok], [r["rel_words"] for r in ok], marker="o",
                label="words/s at np=1")
        ax.plot([r["batch"] for r in rs], [r["rel_gemm"] for r in rs], marker="s", ls="--",
                label=f"layer GEMM GFLOP/s (hidden {rec.hidden})")
        ax.set(xlabel="per-rank batch", ylabel="relative to the largest batch",
               title=f"{rec.name}: per-rank batch vs compute speed")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return path
