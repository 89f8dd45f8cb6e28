"""Time to quality in the report: per experiment (model, data source, framework, target) and
strategy, strong and weak scaling side by side in the seed notes' layout (fixed total batch vs
fixed batch per rank), with time to target, its speedup over one rank, the throughput speedup,
and their ratio, the statistical efficiency: how much of the throughput gain survives in time
to quality. Plots of eval loss against wall-clock time and against words processed.

Only runs with a target (``measure.until``) are shown, grouped by their experiment id without
the scaling axis (hvdscale.records.experiment), so a 1-rank base and an N-rank point always
come from the same experiment. Time to target is interpolated between evaluations
(``crossing``, also used by bench/bench_quality.py); the measured stop is shown beside it.

Independent replicas share no model: each trains its own, and the loss of rank 0's replica
says nothing about what N ranks reached together, so they are shown with throughput only.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hvdscale.records.experiment import experiment_id, plain, strategy_label
from hvdscale.records.fields import Record
from hvdscale.records.run import RunRecord
from hvdscale.study.plotting import figure

SURVIVES = 0.9
"""A weak-scaling point keeps its throughput gain in time to quality at this efficiency."""
_AT = ("train_s", "step", "updates", "words", "wall_s")
"""A curve point's fields that ``crossing`` interpolates (those the point has)."""


def target_loss(until: dict[str, Any], floor_loss: float | None) -> float | None:
    """A ``measure.until`` target as a per-token loss in nats (None: not convertible)."""
    metric, target = until.get("metric"), until.get("target")
    if target is None:
        return None
    if metric == "loss":
        return float(target)
    if metric == "perplexity":
        return math.log(target) if target > 0 else None
    if metric == "floor_fraction" and floor_loss is not None:
        return floor_loss + math.log1p(target)
    return None


def crossing(curve: list[dict[str, Any]], loss: float) -> dict[str, Any] | None:
    """When the curve met ``loss``: linear interpolation (training time, step, words) between
    the last evaluation above it and the first at or below it; None when none met it.

    A run stops at the evaluation that met the target, so the measured stop time is late by up
    to one evaluation interval, differently for each run; interpolating puts every run,
    including the one whose curve gave the target, on the same footing. When the first
    evaluation already meets it there is nothing earlier to interpolate from: that point.
    """
    for i, p in enumerate(curve):
        if not p["loss"] <= loss:  # a NaN (diverged) evaluation never meets a target
            continue
        prev = curve[i - 1] if i else p
        drop = prev["loss"] - p["loss"]
        f = (prev["loss"] - loss) / drop if drop > 0 else 1.0
        return {k: prev[k] + f * (p[k] - prev[k]) for k in _AT if k in p and k in prev}
    return None


def reached_at(rec: RunRecord) -> dict[str, Any] | None:
    """The interpolated crossing of a record's own target (None: not reached, or diverged)."""
    q = rec.quality_or_empty
    loss = target_loss(q["until"], q.get("floor_loss"))
    # The run's own verdict stands: not reached, or diverged (its curve may dip below a loose
    # target after rising above the initial loss; that is no arrival).
    if loss is None or q.get("reached") is False or q.get("diverged"):
        return None
    return crossing(q.get("curve") or [], loss)


def source_name(config: dict[str, Any]) -> str:
    """``text`` or the synthetic source's kind: how a table names a record's data."""
    data = config["data"]
    return data["source"] if data["source"] == "text" else data["synthetic"]["kind"]


def id_without(config: dict[str, Any], section: str, keys: tuple[str, ...]) -> str:
    """The experiment id of ``config`` without ``keys`` of ``section`` (the axis a table
    spreads over) and without the time and step caps (they do not change when a run met its
    target)."""
    bare = copy.deepcopy(dict(config))
    for key in keys:
        bare[section].pop(key, None)
    for cap in ("max_time_s", "max_steps"):
        bare["measure"].get("until", {}).pop(cap, None)
    return experiment_id(bare)


def _group(rec: RunRecord) -> tuple:
    """The experiment without its scaling axis: one table holds its strong and weak runs at
    every rank count. Metric and target are in the id and also named for the heading."""
    c = plain(rec.config)
    until = rec.quality_or_empty["until"]
    return (c["model"]["kind"], source_name(c), c["framework"], until.get("metric"),
            until.get("target"), c["model"].get("rnn_impl"), id_without(c, "data", ("scaling",)))


def _quality_records(records: Sequence[Record]) -> list[RunRecord]:
    """Records of runs that trained to a target (``measure.until``); an evaluation curve
    alone (``eval_every`` without a target) has no time to quality."""
    return [r for r in records if isinstance(r, RunRecord) and r.quality_or_empty.get("until")]


def _latest(records: Sequence[Record]) -> dict[tuple, RunRecord]:
    """The latest record per (group, strategy, scaling, ranks)."""
    out: dict[tuple, RunRecord] = {}
    for r in _quality_records(records):
        c = r.config
        out[(_group(r), strategy_label(c), c.data.scaling, r.ranks)] = r
    return out


def _steps(point: dict[str, Any]) -> float:
    """Updates at a curve point: warm-up included where the record counts it."""
    return point.get("updates", point["step"])


def _cells(rec: RunRecord | None, base: RunRecord | None) -> list[str]:
    """batch/rank, global batch, time to target, its speedup, throughput speedup, efficiency,
    global batch in tokens and B_simple (tokens)."""
    if rec is None:
        return ["", "", "", "", "", "", "", ""]
    c, q, workers = rec.config, rec.quality_or_empty, rec.workers
    per_rank = c.data.batch_size if c.data.scaling == "weak" else c.data.batch_size / workers
    glob = per_rank * workers
    hit = reached_at(rec)
    stop = q.get("time_to_target_s")  # measured: the evaluation that met the target
    if hit is None:
        ttt_s = f"not reached ({q.get('train_s') or 0:.0f} s cap)"
    else:
        ttt_s = f"{hit['train_s']:.1f}" + (f" (stop {stop:.1f})" if stop is not None else "")
    sp = thr = eff = ""
    if base is not None and rec is not base:
        thr_x = rec.words_per_s / base.words_per_s
        thr = f"{thr_x:.2f}"
        bhit = reached_at(base)
        if hit is not None and bhit is not None:
            sp = f"{bhit['train_s'] / hit['train_s']:.2f}"
            eff = f"{bhit['train_s'] / hit['train_s'] / thr_x:.2f}"
    return [f"{per_rank:g}", f"{glob:g}", ttt_s, sp, thr, eff, *_noise_cells(q)]


def _noise_cells(q: dict[str, Any]) -> list[str]:
    """Global batch in tokens and B_simple with its p10-p90 (hvdscale.train.noise_scale);
    ``-`` where the record has none (one rank, independent, probe off, older records)."""
    ns = q.get("noise_scale") or {}
    tokens, est = ns.get("global_batch_tokens"), ns.get("b_simple_tokens")
    if est is None:
        return [f"{tokens:.0f}" if tokens else "-", "-"]
    return [f"{tokens:.0f}", f"{est:.0f} ({ns['p10']:.0f}-{ns['p90']:.0f})"]


def _verdict(rec: RunRecord | None, base: RunRecord | None) -> str:
    """Whether a weak point's throughput gain survived in time to quality, or why not."""
    if rec is None or base is None or rec is base:
        return ""
    hit, bhit = reached_at(rec), reached_at(base)
    if bhit is None:
        return "1-rank target not reached"
    if hit is None:
        return "target not reached"
    eff = bhit["train_s"] / hit["train_s"] / (rec.words_per_s / base.words_per_s)
    if eff >= SURVIVES:
        return f"kept ({eff:.2f})"
    return (f"lost ({eff:.2f}): steps to target x{_steps(hit) / _steps(bhit):.2f}, words to "
            f"target x{hit['words'] / bhit['words']:.2f}")


def quality_section(records: Sequence[Record]) -> str:
    """Markdown: one table per experiment and strategy, strong | weak side by side."""
    latest = _latest(records)
    if not latest:
        return ""
    lines = ["## Time to quality\n",
             "Time to target is training time (evaluation excluded) until the held-out metric "
             "met the target, interpolated linearly between the evaluations either side of it "
             "(stop: the evaluation at which the run stopped); statistical efficiency = "
             "time-to-target speedup / throughput speedup; steps to target count warm-up "
             f"updates where the record does (>= {SURVIVES}: the throughput gain survived).\n",
             "B_simple: the gradient noise scale in tokens (p10-p90), measured during the run; a "
             "global batch well above it means more ranks stop cutting the steps to target.\n"]
    for group in sorted({k[0] for k in latest}, key=repr):
        kind, source, fw, metric, target = group[:5]
        lines.append(f"\n### {kind} on {source}, {fw} ({group[5]}): {metric} <= {target} "
                     f"(experiment {group[6]})\n")
        for strategy in sorted({k[1] for k in latest if k[0] == group}):
            lines += _strategy_table(latest, group, strategy)
    return "\n".join(lines) + "\n"


def _strategy_table(latest: dict[tuple, RunRecord], group: tuple,
                    strategy: str) -> list[str]:
    ranks = sorted({k[3] for k in latest if k[0] == group and k[1] == strategy})
    if strategy == "independent":
        rows = [f"| {n} | {latest[group, strategy, s, n].words_per_s:.0f} "
                f"| {s} |" for n in ranks for s in ("strong", "weak")
                if (group, strategy, s, n) in latest]
        return [f"\n**{strategy}**: throughput only: independent replicas share no model, so "
                "no single model's quality measures what the ranks reached together.\n",
                "| ranks | words/s | scaling |", "|--|--|--|", *rows]
    head = ("| ranks | strong: batch/rank | total batch | time to target (s) | speedup | "
            "throughput speedup | stat. eff. | batch (tokens) | B_simple (tokens) | "
            "weak: batch/rank | total batch | time to target (s) | speedup | throughput speedup "
            "| stat. eff. | batch (tokens) | B_simple (tokens) | weak: gain survived? |")
    out = [f"\n**{strategy}**\n", head, "|" + "--|" * 18]
    # At one rank strong and weak scaling are the same run: either serves both columns.
    one = [latest.get((group, strategy, s, 1)) for s in ("strong", "weak")]
    base = {"strong": one[0] or one[1], "weak": one[1] or one[0]}
    for n in ranks:
        strong = base["strong"] if n == 1 else latest.get((group, strategy, "strong", n))
        weak = base["weak"] if n == 1 else latest.get((group, strategy, "weak", n))
        cells = _cells(strong, base["strong"]) + _cells(weak, base["weak"])
        out.append(f"| {n} | " + " | ".join(cells) + f" | {_verdict(weak, base['weak'])} |")
    return out


def plot_quality(records: Sequence[Record], out_dir: Path) -> list[Path]:
    """Per experiment: eval loss vs wall-clock time and vs words, a line per strategy,
    scaling and rank count."""
    latest = _latest(records)
    files = []
    for i, group in enumerate(sorted({k[0] for k in latest}, key=repr)):
        path = Path(out_dir) / f"quality_{i}_{group[0]}_{group[1]}_{group[2]}.png"
        with figure(path, 1, 2, figsize=(11, 4)) as (_, (by_time, by_words)):
            for (g, strategy, scaling, n), rec in sorted(latest.items(), key=repr):
                if g != group or strategy == "independent":
                    continue
                curve = rec.quality_or_empty["curve"]
                label = f"{strategy} {scaling} np={n}"
                loss = [p["loss"] for p in curve]
                by_time.plot([p["wall_s"] for p in curve], loss, marker=".", label=label)
                by_words.plot([p["words"] for p in curve], loss, marker=".", label=label)
            by_time.set_xlabel("wall-clock time since the first step (s)")
            by_words.set_xlabel("words processed (all ranks)")
            for ax in (by_time, by_words):
                ax.set_ylabel("held-out loss (nats/token)")
                ax.legend(fontsize=7)
            by_time.set_title(f"{group[0]} on {group[1]} ({group[2]})")
        files.append(path)
    return files
