"""Time to quality in the report: per experiment (model, data source, framework, target) and
strategy, strong and weak scaling side by side in the seed notes' layout (fixed total batch vs
fixed batch per rank), with time to target, its speedup over one rank, the throughput speedup,
and their ratio, the statistical efficiency: how much of the throughput gain survives in time
to quality. Plots of eval loss against wall-clock time and against words processed.

Independent replicas share no model: each trains its own, and the loss of rank 0's replica
says nothing about what N ranks reached together, so they are shown with throughput only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hvdscale.study.plotting import figure

SURVIVES = 0.9
"""A weak-scaling point keeps its throughput gain in time to quality at this efficiency."""


def _group(rec: dict[str, Any]) -> tuple:
    c = rec["config"]
    data = c["data"]
    source = data["source"] if data["source"] == "text" else data["synthetic"]["kind"]
    until = rec["quality"].get("until") or {}
    return (c["model"]["kind"], source, c["framework"], until.get("metric"), until.get("target"))


def _quality_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r.get("status") == "ok" and r.get("quality")]


def _latest(records: list[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    """The latest record per (group, strategy, scaling, ranks)."""
    out: dict[tuple, dict[str, Any]] = {}
    for r in _quality_records(records):
        c = r["config"]
        out[(_group(r), c["strategy"]["name"], c["data"]["scaling"], r["ranks"])] = r
    return out


def _cells(rec: dict[str, Any] | None, base: dict[str, Any] | None) -> list[str]:
    """batch/rank, global batch, time to target, its speedup, throughput speedup, efficiency."""
    if rec is None:
        return ["", "", "", "", "", ""]
    c, q = rec["config"], rec["quality"]
    per_rank = c["data"]["batch_size"] if c["data"]["scaling"] == "weak" else \
        c["data"]["batch_size"] / rec["workers"]
    glob = per_rank * rec["workers"]
    ttt = q.get("time_to_target_s")
    ttt_s = f"{ttt:.1f}" if ttt is not None else f"not reached ({q.get('train_s', 0):.0f} s cap)"
    sp = thr = eff = ""
    if base is not None and rec is not base:
        thr_x = rec["words_per_s"] / base["words_per_s"]
        thr = f"{thr_x:.2f}"
        bt = base["quality"].get("time_to_target_s")
        if ttt is not None and bt is not None:
            sp = f"{bt / ttt:.2f}"
            eff = f"{bt / ttt / thr_x:.2f}"
    return [f"{per_rank:g}", f"{glob:g}", ttt_s, sp, thr, eff]


def _verdict(rec: dict[str, Any] | None, base: dict[str, Any] | None) -> str:
    """Whether a weak point's throughput gain survived in time to quality, or why not."""
    if rec is None or base is None or rec is base:
        return ""
    q, bq = rec["quality"], base["quality"]
    if q.get("time_to_target_s") is None:
        return "target not reached"
    eff = bq["time_to_target_s"] / q["time_to_target_s"] / (rec["words_per_s"]
                                                             / base["words_per_s"])
    if eff >= SURVIVES:
        return f"kept ({eff:.2f})"
    return (f"lost ({eff:.2f}): steps to target x{q['steps'] / bq['steps']:.2f}, words to "
            f"target x{q['words'] / bq['words']:.2f}")


def quality_section(records: list[dict[str, Any]]) -> str:
    """Markdown: one table per experiment and strategy, strong | weak side by side."""
    latest = _latest(records)
    if not latest:
        return ""
    lines = ["## Time to quality\n",
             "Time to target is training time (evaluation excluded) until the held-out metric "
             "met the target; statistical efficiency = time-to-target speedup / throughput "
             f"speedup (>= {SURVIVES}: the throughput gain survived).\n"]
    for group in sorted({k[0] for k in latest}, key=repr):
        kind, source, fw, metric, target = group
        lines.append(f"\n### {kind} on {source}, {fw}: {metric} <= {target}\n")
        for strategy in sorted({k[1] for k in latest if k[0] == group}):
            lines += _strategy_table(latest, group, strategy)
    return "\n".join(lines) + "\n"


def _strategy_table(latest: dict[tuple, dict[str, Any]], group: tuple,
                    strategy: str) -> list[str]:
    ranks = sorted({k[3] for k in latest if k[0] == group and k[1] == strategy})
    if strategy == "independent":
        rows = [f"| {n} | {latest.get((group, strategy, s, n), {}).get('words_per_s', 0):.0f} "
                f"| {s} |" for n in ranks for s in ("strong", "weak")
                if (group, strategy, s, n) in latest]
        return [f"\n**{strategy}**: throughput only: independent replicas share no model, so "
                "no single model's quality measures what the ranks reached together.\n",
                "| ranks | words/s | scaling |", "|--|--|--|", *rows]
    head = ("| ranks | strong: batch/rank | total batch | time to target (s) | speedup | "
            "throughput speedup | stat. eff. | weak: batch/rank | total batch | "
            "time to target (s) | speedup | throughput speedup | stat. eff. | weak: gain "
            "survived? |")
    out = [f"\n**{strategy}**\n", head, "|" + "--|" * 14]
    # At one rank strong and weak scaling are the same run: either serves both columns.
    one = [latest.get((group, strategy, s, 1)) for s in ("strong", "weak")]
    base = {"strong": one[0] or one[1], "weak": one[1] or one[0]}
    for n in ranks:
        strong = base["strong"] if n == 1 else latest.get((group, strategy, "strong", n))
        weak = base["weak"] if n == 1 else latest.get((group, strategy, "weak", n))
        cells = _cells(strong, base["strong"]) + _cells(weak, base["weak"])
        out.append(f"| {n} | " + " | ".join(cells) + f" | {_verdict(weak, base['weak'])} |")
    return out


def plot_quality(records: list[dict[str, Any]], out_dir: Path) -> list[Path]:
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
                curve = rec["quality"]["curve"]
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
