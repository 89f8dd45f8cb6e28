"""Scaling tables in the seed notes' layout, the series side by side, CSV and plots.

Records are grouped by experiment (hvdscale.records.experiment): records of different experiments
never share a table or a median, and a directory holding several gets one section each, saying
what differs between them. Within an experiment, framework, RNN implementation and strategy
(with its settings) are series, compared side by side.

speedup_N = words/s with N workers / words/s with 1 worker (same experiment and series);
efficiency = 100 * speedup_N / N. Workers are the ranks that compute: all ranks, except under a
dedicated parameter server, whose serve-only ranks are not counted (the table says so). Repeated
points are summarised by their median.

Each section is labelled with its scaling mode (the seed notes' two tests): weak scaling keeps
the batch per rank fixed, so the global batch grows with the ranks; strong scaling fixes the
global batch and divides it across ranks. A further table shows real vs padded tokens (with and
without bucketing) and the straggler cost: the time ranks idle waiting for a slower rank's
compute, and the ranks that ran out of batches in epoch-bounded runs.
"""

from __future__ import annotations

import csv
import io
import json
import os
import statistics
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hvdscale.errors import HvdscaleError
from hvdscale.records.experiment import differences, experiment_id, identity_id, series_label
from hvdscale.records.store import load_records
from hvdscale.study.breakdown import section as why_not_better

STRATEGY_ORDER = {"independent": 0, "horovod": 1, "ps": 2}


@dataclass
class Point:
    """One (group, strategy, ranks) point of the report: the median of its repeats."""

    strategy: str
    ranks: int
    workers: int
    batch_size: int
    steps: int
    time_s: float
    words_per_s: float
    repeats: int
    jitter_ms: float
    placement: str
    speedup: float | None = None
    efficiency: float | None = None
    tokens_per_batch: int = 0
    real_tokens: int | None = None
    token_slots: int | None = None
    padded_pct: float | None = None
    unbucketed_padded_pct: float | None = None
    pad_to_max_padded_pct: float | None = None
    work_ratio: float | None = None
    idle_ms_per_step: float | None = None
    idle_pct: float | None = None
    idle_per_rank: str = ""
    out_of_batches: str = ""


def _bucketing_mode(config: dict) -> str:
    """``data.bucketing.mode`` of a config (older records only say ``align_ranks``)."""
    b = config.get("data", {}).get("bucketing", {})
    return b.get("mode") or ("aligned" if b.get("align_ranks") else "per_rank")


MODE_LABELS = {"aligned": " (ranks aligned on one bucket per step)",
               "global": " (one global batch per step from one bucket, split across ranks by "
                         "padded slots)"}


def _median_of(recs: list[dict], get: Any) -> float | None:
    """Median of ``get(rec)`` over the records where it is known."""
    vals = []
    for r in recs:
        try:
            v = get(r)
        except (KeyError, TypeError, IndexError):
            continue
        if v is not None:
            vals.append(v)
    return statistics.median(vals) if vals else None


def _idle_cells(rec: dict) -> tuple[str, str]:
    """Per-rank idle (ms/step) and ranks out of batches (idle steps), from one record."""
    idle = rec.get("idle") or {}
    per_rank = idle.get("per_rank", [])
    ms = " / ".join(f"r{p['rank']}: {p['idle_ms_per_step']:.1f}" for p in per_rank)
    out = ", ".join(f"r{p['rank']}: {p['idle_steps']} of {idle.get('steps', '?')}"
                    for p in per_rank if p.get("idle_steps"))
    return ms, out or "none"


@dataclass
class Experiment:
    """The records of one experiment (see hvdscale.records.experiment): its series, each a list of
    points by rank count, and what sets it apart from the other experiments of the report."""

    id: str
    config: dict[str, Any]
    names: list[str]
    series: dict[str, list[Point]] = field(default_factory=dict)
    differs: dict[str, Any] = field(default_factory=dict)


# Fields every successful record must hold for the report; a record lacking one is named with
# its file and line instead of ending the report in a KeyError.
_NEEDED_OK = ("ranks", "workers", "words_per_s", "window_s", "step_time", "measure")


def check_records(records: list[tuple[str, dict]]) -> list[dict]:
    """The records, after checking each has what the report reads.

    Raises:
        HvdscaleError: ``FILE:LINE`` of the first record that is not an hvdscale run record.
    """
    out = []
    for where, rec in records:
        missing = [] if isinstance(rec.get("config"), dict) else ["config"]
        if rec.get("status") == "ok":
            missing += [k for k in _NEEDED_OK if k not in rec]
        elif not isinstance(rec.get("ranks"), int):
            missing.append("ranks")
        if "status" not in rec:
            missing.insert(0, "status")
        if missing:
            raise HvdscaleError(f"{where}: not an hvdscale run record (no {', '.join(missing)}); "
                                "records are written by 'hvdscale run' and 'hvdscale sweep'")
        out.append(rec)
    return out


def _point(label: str, ranks: int, recs: list[dict]) -> Point:
    """The median of one series' repeats at one rank count."""
    cfg = recs[-1]["config"]
    idle_ms, out_of = _idle_cells(recs[-1])
    bucketing = cfg.get("data", {}).get("bucketing", {})
    return Point(
        strategy=label, ranks=ranks, workers=recs[-1]["workers"],
        batch_size=cfg.get("data", {}).get("batch_size", 0),
        steps=recs[-1]["measure"]["steps"],
        time_s=statistics.median(r["window_s"] for r in recs),
        words_per_s=statistics.median(r["words_per_s"] for r in recs), repeats=len(recs),
        jitter_ms=statistics.median(r["step_time"]["jitter"] for r in recs) * 1e3,
        placement=cfg.get("strategy", {}).get("ps", {}).get("placement", "")
        if cfg.get("strategy", {}).get("name") == "ps" else "",
        tokens_per_batch=bucketing.get("tokens_per_batch", 0) if bucketing.get("enabled") else 0,
        real_tokens=_median_of(recs, lambda r: r["padding"]["window"]["words"]),
        token_slots=_median_of(recs, lambda r: r["padding"]["window"]["slots"]),
        padded_pct=_median_of(recs, lambda r: 100 * r["padded_fraction"]),
        unbucketed_padded_pct=_median_of(
            recs, lambda r: 100 * r["padding"]["epoch_unbucketed"]["padded_fraction"]),
        pad_to_max_padded_pct=_median_of(
            recs, lambda r: 100 * r["padding"]["epoch_pad_to_max"]["padded_fraction"]),
        work_ratio=_median_of(recs, lambda r: r["padding"]["window"]["work_ratio"]),
        idle_ms_per_step=_median_of(recs, lambda r: r["idle"]["idle_ms_per_step"]),
        idle_pct=_median_of(recs, lambda r: 100 * r["idle"]["idle_fraction"]),
        idle_per_rank=idle_ms, out_of_batches=out_of)


def collect(records: list[dict]) -> dict[str, Experiment]:
    """Successful records as experiments of series of points: records of different
    experiments never share a table, and a point's repeats share one identity."""
    by: dict[str, dict[str, dict[int, list[dict]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    first: dict[str, dict] = {}
    names: dict[str, list[str]] = defaultdict(list)
    for rec in records:
        if rec.get("status") != "ok" or rec.get("kind", "run") != "run":
            continue
        eid = experiment_id(rec["config"])
        first.setdefault(eid, rec["config"])
        name = rec["config"].get("name", "run")
        if name not in names[eid]:
            names[eid].append(name)
        by[eid][series_label(rec["config"])][rec["ranks"]].append(rec)
    diffs = differences(first)
    out: dict[str, Experiment] = {}
    for eid, series in by.items():
        exp = Experiment(eid, first[eid], names[eid], differs=diffs[eid])
        for label, per_ranks in series.items():
            points = [_point(label, n, recs) for n, recs in sorted(per_ranks.items())]
            base = next((p for p in points if p.workers == 1), None)
            for p in points:
                if base is not None:
                    p.speedup = p.words_per_s / base.words_per_s
                    p.efficiency = 100.0 * p.speedup / p.workers
            exp.series[label] = points
        out[eid] = exp
    return out


def _fmt(x: float | None, spec: str) -> str:
    return "" if x is None else format(x, spec)


SCALING_LABELS = {"weak": "weak scaling (fixed batch per rank, global batch grows)",
                  "strong": "strong scaling (fixed global batch divided across ranks)"}


def _title(exp: Experiment) -> str:
    c = exp.config
    data, measure = c.get("data", {}), c.get("measure", {})
    bucketing = data.get("bucketing", {})
    model = c.get("model", {}).get("kind", "?")
    scaling = data.get("scaling", "weak")
    extra = ", length-bucketed" if bucketing.get("enabled") else ""
    extra += MODE_LABELS.get(_bucketing_mode(c), "") if bucketing.get("enabled") else ""
    extra += ", every batch padded to the max length" if data.get("pad_to") == "max" else ""
    epochs = measure.get("epochs", 0)
    extra += f", {epochs} epoch{'s' if epochs != 1 else ''} per run" if epochs else ""
    return (f"{' + '.join(exp.names)}: {model} / {SCALING_LABELS.get(scaling, scaling)}{extra} "
            f"[experiment {exp.id}]")


def _differs_line(exp: Experiment) -> str:
    """What sets this experiment apart from the report's others (empty when it is alone)."""
    if not exp.differs:
        return ""
    cells = ", ".join(f"`{k}={json.dumps(v)}`" for k, v in exp.differs.items())
    return f"Differs from the other experiments in this report in: {cells}.\n\n"


IMPL_NAMES = {"fused": "fused kernel (cudnn_lstm-style)",
              "loop": "step-by-step loop (dynamic_rnn-style)"}


def _series_order(exp: Experiment) -> list[str]:
    def key(label: str) -> tuple:
        fw, impl, strategy = label.split(" / ", 2)
        return (fw, STRATEGY_ORDER.get(strategy.split("-")[0].split(" ")[0], 9), strategy, impl)
    return sorted(exp.series, key=key)


def _batch_cells(p: Point, scaling: str) -> tuple[str, str]:
    """(batch per rank, global batch) as the seed notes' tables show them."""
    unit = " tok" if p.tokens_per_batch else ""
    size = p.tokens_per_batch or p.batch_size
    if scaling == "strong":
        lo, hi = size // p.workers, -(-size // p.workers)
        per = f"{lo}{unit}" if lo == hi else f"{lo}-{hi}{unit}"
        return per, f"{size}{unit}"
    return f"{size}{unit}", f"{size} x {p.workers} = {size * p.workers}{unit}"


def markdown(experiments: dict[str, Experiment]) -> str:
    """The report as Markdown: per experiment, per series the seed notes' table, then the
    series side by side and the padding and idle figures."""
    buf = io.StringIO()
    buf.write("# hvdscale scaling report\n\n")
    if len(experiments) > 1:
        buf.write(f"{len(experiments)} different experiments are recorded here; each has its own "
                  "tables, and no figure mixes records of two of them.\n\n")
    for exp in sorted(experiments.values(), key=lambda e: (e.names, e.id)):
        buf.write(f"## {_title(exp)}\n\n")
        buf.write(_differs_line(exp))
        order = _series_order(exp)
        scaling = exp.config.get("data", {}).get("scaling", "weak")
        epochs = exp.config.get("measure", {}).get("epochs", 0)
        for label in order:
            pts = exp.series[label]
            fw, impl, strategy = label.split(" / ", 2)
            buf.write(f"### {label}\n\n")
            buf.write(f"{fw}, {IMPL_NAMES.get(impl, impl)}, strategy {strategy}.\n\n")
            if any(p.placement == "dedicated" for p in pts):
                buf.write("Speedup and efficiency are over worker ranks (servers excluded).\n\n")
            span = (f"run {epochs} epoch{'s' if epochs != 1 else ''}" if epochs
                    else f"process {pts[0].steps} batches")
            buf.write(f"|Ranks|Workers|Batch per rank|Global batch|Total time to {span} (s)|"
                      "Processing speed (words/s)|Speedup ratio|Efficiency (%)|Step jitter (ms)|"
                      "Runs|\n")
            buf.write("|:--|:--|:--|:--|:--|:--|:--|:--|:--|:--|\n")
            for p in pts:
                per, total = _batch_cells(p, scaling)
                buf.write(f"|{p.ranks}|{p.workers}|{per}|{total}|{p.time_s:.3f}|"
                          f"{p.words_per_s:.1f}|"
                          f"{'' if p.workers == 1 else _fmt(p.speedup, '.2f')}|"
                          f"{_fmt(p.efficiency, '.1f')}|{p.jitter_ms:.2f}|{p.repeats}|\n")
            if not any(p.workers == 1 for p in pts):
                buf.write("\n(no 1-worker run recorded: speedup cannot be computed)\n")
            buf.write("\n")
        buf.write(side_by_side(exp.series, order))
        buf.write(padding_and_idle(exp.series, order))
    return buf.getvalue()


def padding_and_idle(strategies: dict[str, list[Point]], order: list[str]) -> str:
    """Real vs padded tokens (with and without bucketing) and the straggler idle time."""
    rows = [p for s in order for p in strategies[s] if p.padded_pct is not None]
    if not rows:
        return ""
    out = ["### Padding and straggler idle\n",
           "Padding: share of token slots that are padding in the measured window; one epoch of "
           "the same data batched without bucketing, and padded to the longest sentence, for "
           "comparison. RNN work ratio: the slots the recurrence really runs per real token "
           "(the padded batch for the step-by-step loop; the live sequences of each time step, "
           "i.e. 1.0, for the fused kernel's packed sequences). Idle: time a rank waits at a "
           "step for a slower rank's compute (a step "
           "with no batch left waits the slowest rank's whole compute; independent replicas "
           "only wait at the end of the window); mean over ranks.\n",
           "|Strategy|Ranks|Real tokens|Token slots|Padding (%)|Unbucketed padding (%)|"
           "Padded-to-max padding (%)|RNN work ratio|Idle per step (ms)|Idle (% of time)|"
           "Idle per rank (ms/step)|Out of batches (steps)|",
           "|:--|:--|:--|:--|:--|:--|:--|:--|:--|:--|:--|:--|"]
    for p in rows:
        out.append(f"|{p.strategy}|{p.ranks}|{_fmt(p.real_tokens, '.0f')}|"
                   f"{_fmt(p.token_slots, '.0f')}|{_fmt(p.padded_pct, '.1f')}|"
                   f"{_fmt(p.unbucketed_padded_pct, '.1f')}|{_fmt(p.pad_to_max_padded_pct, '.1f')}|"
                   f"{_fmt(p.work_ratio, '.2f')}|"
                   f"{_fmt(p.idle_ms_per_step, '.2f')}|{_fmt(p.idle_pct, '.1f')}|"
                   f"{p.idle_per_rank}|{p.out_of_batches}|")
    return "\n".join(out) + "\n\n"


def side_by_side(series: dict[str, list[Point]], order: list[str]) -> str:
    """One row per framework x strategy x RNN implementation: words/s and speedup at every
    rank count next to each other, and words/s relative to independent replicas of the same
    framework and implementation (the ideal) at the largest rank count both have."""
    if len(order) < 2:
        return ""
    ranks = sorted({p.ranks for pts in series.values() for p in pts})
    head = ("|Framework|Strategy|RNN impl|"
            + "|".join(f"words/s N={n}|speedup N={n}" for n in ranks) + "|vs independent|")
    out = ["### Side by side: framework x strategy x RNN implementation\n", head,
           "|" + ":--|" * (4 + 2 * len(ranks))]
    for label in order:
        fw, impl, strategy = label.split(" / ", 2)
        by = {p.ranks: p for p in series[label]}
        row = [fw, strategy, impl]
        for n in ranks:
            p = by.get(n)
            row += ["" if p is None else f"{p.words_per_s:.1f}",
                    "" if p is None or p.speedup is None or p.workers == 1
                    else f"{p.speedup:.2f}"]
        ideal = {p.ranks: p for p in series.get(f"{fw} / {impl} / independent", [])}
        both = [n for n in by if n in ideal]
        if strategy != "independent" and both:
            n = max(both)
            row.append(f"{by[n].words_per_s / ideal[n].words_per_s:.3f} at N={n}")
        else:
            row.append("")
        out.append("|" + "|".join(row) + "|")
    return "\n".join(out) + "\n\n"


def to_csv(experiments: dict[str, Experiment]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["experiment", "name", "model", "framework", "rnn_impl", "scaling", "bucketing",
                "pad_to", "epochs", "bucketing_mode", "strategy", "ranks", "workers",
                "batch_size", "tokens_per_batch", "steps", "time_s", "words_per_s", "speedup",
                "efficiency_pct", "step_jitter_ms", "runs", "padded_pct",
                "unbucketed_padded_pct", "idle_ms_per_step", "idle_pct"])
    for exp in sorted(experiments.values(), key=lambda e: (e.names, e.id)):
        c = exp.config
        data = c.get("data", {})
        bucketing = data.get("bucketing", {})
        for label in _series_order(exp):
            fw, impl, strategy = label.split(" / ", 2)
            for p in exp.series[label]:
                w.writerow([exp.id, " + ".join(exp.names), c.get("model", {}).get("kind"), fw,
                            impl, data.get("scaling"), bucketing.get("enabled", False),
                            data.get("pad_to"), c.get("measure", {}).get("epochs", 0),
                            _bucketing_mode(c), strategy, p.ranks, p.workers,
                            p.batch_size, p.tokens_per_batch, p.steps, f"{p.time_s:.4f}",
                            f"{p.words_per_s:.2f}", _fmt(p.speedup, ".4f"),
                            _fmt(p.efficiency, ".2f"), f"{p.jitter_ms:.3f}", p.repeats,
                            _fmt(p.padded_pct, ".2f"), _fmt(p.unbucketed_padded_pct, ".2f"),
                            _fmt(p.idle_ms_per_step, ".3f"), _fmt(p.idle_pct, ".2f")])
    return buf.getvalue()


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _slug(exp: Experiment) -> str:
    s = f"{'+'.join(exp.names)}_{exp.id}"
    return "".join(c if c.isalnum() or c in "-_.+" else "-" for c in s)


def plot_scaling(experiments: dict[str, Experiment], out_dir: Path) -> list[Path]:
    """Per experiment, one PNG: words/s vs workers (with the ideal line) and efficiency."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for exp in sorted(experiments.values(), key=lambda e: (e.names, e.id)):
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
        for label, pts in sorted(exp.series.items()):
            xs = [p.workers for p in pts]
            line, = ax1.plot(xs, [p.words_per_s for p in pts], marker="o", label=label)
            base = next((p for p in pts if p.workers == 1), None)
            if base is not None:
                ideal_x = sorted({1, *xs})
                ax1.plot(ideal_x, [base.words_per_s * x for x in ideal_x], ls="--", lw=1,
                         color=line.get_color(), alpha=0.6, label=f"{label} ideal")
                ax2.plot(xs, [p.efficiency for p in pts], marker="o", label=label,
                         color=line.get_color())
        ax1.set(xlabel="workers (ranks computing)", ylabel="words/s",
                title="Throughput (dashed: linear scaling)")
        ax2.axhline(100, color="grey", lw=1, ls=":")
        ax2.set(xlabel="workers (ranks computing)", ylabel="efficiency (%)",
                title="Scaling efficiency = 100 x speedup / N", ylim=(0, 110))
        for ax in (ax1, ax2):
            ax.grid(alpha=0.3)
            if ax.get_legend_handles_labels()[0]:  # no 1-worker run: no lines
                ax.legend(fontsize=8)
            ax.xaxis.get_major_locator().set_params(integer=True)
        fig.suptitle(_title(exp), fontsize=10)
        fig.tight_layout()
        path = out_dir / f"scaling_{_slug(exp)}.png"
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        plt.close(fig)
        _atomic_write(path, buf.getvalue())
        written.append(path)
    return written


def _point_id(rec: dict) -> tuple:
    return (rec.get("ranks"), identity_id(rec["config"]))


def open_failures(records: list[dict]) -> list[dict]:
    """Failed records not measured successfully later (same identity and ranks): a sweep that
    redoes a failed point should not go on reporting the old failure."""
    last_ok = {_point_id(r): i for i, r in enumerate(records) if r.get("status") == "ok"}
    return [r for i, r in enumerate(records)
            if r.get("status") != "ok" and last_ok.get(_point_id(r), -1) < i]


def _cell(text: str) -> str:
    """One Markdown table cell: no newlines, no column breaks."""
    return " ".join(str(text).split()).replace("|", "\\|")


def horovod_timelines(records: list[dict]) -> str:
    """One row per run that captured Horovod's timeline: where its allreduce time went."""
    rows = []
    for r in records:
        tl = (r.get("strategy") or {}).get("timeline") or {}
        s = tl.get("summary")
        if r.get("status") != "ok" or not s:
            continue
        h = r["config"]["strategy"]["horovod"]
        m = s["median"]
        t, c = h.get("fusion_threshold_mb"), h.get("cycle_time_ms")
        setting = (("default" if t is None else f"{t:g} MiB") + " / "
                   + ("default" if c is None else f"{c:g} ms") + f" / {h.get('overlap', 'hooks')}")
        cells = [r["name"], str(r["ranks"]), setting, _fmt(m.get("fused_buffers"), ".0f"),
                 _fmt(m.get("backward_ms"), ".1f"), _fmt(m.get("allreduce_ms"), ".1f"),
                 _fmt(m.get("allreduce_during_backward_ms"), ".1f"),
                 _fmt(m.get("wait_after_backward_ms"), ".1f"),
                 _fmt(m.get("NEGOTIATE_ALLREDUCE_ms"), ".1f"),
                 _fmt((m.get("MEMCPY_IN_FUSION_BUFFER_ms") or 0)
                      + (m.get("MEMCPY_OUT_FUSION_BUFFER_ms") or 0), ".2f"),
                 _fmt(s["cycles"].get("median_gap_ms"), ".1f")]
        rows.append("|" + "|".join(_cell(c) for c in cells) + "|")
    if not rows:
        return ""
    return ("## Horovod timeline (median per captured step)\n\n"
            "|Run|Ranks|Fusion / cycle / overlap|Buffers|Backward ms|Allreduce ms|"
            "…during backward|Wait after backward ms|Negotiate ms|Memcpy ms|Cycle gap ms|\n"
            "|:--|--:|:--|--:|--:|--:|--:|--:|--:|--:|--:|\n" + "\n".join(rows) + "\n\n")


def _output_dir(results: str | Path, out: str | Path | None) -> Path:
    src = Path(results)
    out_dir = Path(out) if out else (src if src.is_dir() else src.parent)
    if out_dir.exists() and not out_dir.is_dir():
        raise HvdscaleError(f"report directory {out_dir} is an existing file, not a directory; "
                            "give --out a directory")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise HvdscaleError(f"report directory {out_dir} cannot be created: "
                            f"{e.strerror or e}") from None
    return out_dir


def write_report(results: str | Path, out: str | Path | None = None, plot: bool = False) -> str:
    """Read records under ``results``, write report.md, report.csv (and PNGs); return the md.

    Raises:
        HvdscaleError: unreadable results, a record that is not an hvdscale record, or an
            output directory that cannot be written.
    """
    loaded = load_records(results)
    # gemm, profile and batch records (``kind``) have their own sections below the runs'.
    others = [rec for _, rec in loaded if rec.get("kind", "run") != "run"]
    records = check_records([(w, rec) for w, rec in loaded if rec.get("kind", "run") == "run"])
    exps = collect(records)
    failed = open_failures(records)
    md = markdown(exps) + why_not_better(records)
    if failed:
        md += ("## Failed points\n\n|Experiment|Series|Ranks|Reason|\n|:--|:--|:--|:--|\n")
        for r in failed:
            md += (f"|{experiment_id(r['config'])}|{_cell(series_label(r['config']))}|"
                   f"{r['ranks']}|{_cell(r.get('error', ''))[:200]}|\n")
        md += "\n"
    md += horovod_timelines(records)
    md += kind_sections(others)
    out_dir = _output_dir(results, out)
    try:
        if plot:
            files = plot_scaling(exps, out_dir)
            md += "Plots: " + ", ".join(str(f) for f in files) + "\n"
        _atomic_write(out_dir / "report.md", md.encode())
        _atomic_write(out_dir / "report.csv", to_csv(exps).encode())
    except OSError as e:
        raise HvdscaleError(f"report directory {out_dir} cannot be written: "
                            f"{e.strerror or e}") from None
    return md


def kind_sections(records: list[dict[str, Any]]) -> str:
    """Markdown of the latest gemm record and of the latest profile and batch records per
    config, from the modules that wrote them."""
    from hvdscale.study import batch as batchsize
    from hvdscale.study import gemm, profile

    render = {"gemm": gemm.markdown, "profile": profile.markdown, "batch": batchsize.markdown}
    latest: dict[tuple, dict[str, Any]] = {}
    for r in records:
        if r.get("kind") in render and r.get("status") == "ok":
            ident = (r["kind"],) if r["kind"] == "gemm" else (r["kind"], repr(r.get("config")))
            latest[ident] = r
    return "".join(render[r["kind"]](r) + "\n" for r in latest.values())


def summary_rows(records: list[dict[str, Any]]) -> list[Point]:
    """Every point, flat (for callers that print their own view)."""
    return [p for e in collect(records).values() for pts in e.series.values() for p in pts]
