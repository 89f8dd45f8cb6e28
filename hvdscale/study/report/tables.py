"""The report's tables: Markdown in the seed notes' layout, the series side by side, padding
and straggler idle, Horovod timelines, failed points, and the CSV of every point.

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
from collections.abc import Sequence

from hvdscale.config.run import RunConfig
from hvdscale.records.experiment import experiment_id, series_label
from hvdscale.records.failed import FailedRecord
from hvdscale.records.fields import Record
from hvdscale.records.run import RunRecord
from hvdscale.registry import order_key
from hvdscale.study.report.native_tables import horovod_vs_native
from hvdscale.study.report.noise import (
    busy_line,
    ci_cell,
    comparisons,
    host_cell,
    mark,
    range_cells,
    ratio_cell,
    speedup_cell,
    wps_cell,
)
from hvdscale.study.report.points import Experiment, Point

MODE_LABELS = {"aligned": " (ranks aligned on one bucket per step)",
               "global": " (one global batch per step from one bucket, split across ranks by "
                         "padded slots)"}
SCALING_LABELS = {"weak": "weak scaling (fixed batch per rank, global batch grows)",
                  "strong": "strong scaling (fixed global batch divided across ranks)"}
IMPL_NAMES = {"fused": "fused kernel (cudnn_lstm-style)",
              "loop": "step-by-step loop (dynamic_rnn-style)"}


def _bucketing_mode(config: RunConfig) -> str:
    """``data.bucketing.mode`` of a config (older records only say ``align_ranks``)."""
    b = config.data.bucketing
    return b.mode or ("aligned" if b.align_ranks else "per_rank")


def _fmt(x: float | None, spec: str) -> str:
    """``x`` formatted, or an empty cell when unknown."""
    return "" if x is None else format(x, spec)


def title(exp: Experiment) -> str:
    """An experiment's heading: its names, model, scaling mode, batching and id."""
    c = exp.config
    data, bucketing, model, scaling = c.data, c.data.bucketing, c.model.kind, c.data.scaling
    extra = ", length-bucketed" if bucketing.enabled else ""
    extra += MODE_LABELS.get(_bucketing_mode(c), "") if bucketing.enabled else ""
    extra += ", every batch padded to the max length" if data.pad_to == "max" else ""
    epochs = c.measure.epochs
    extra += f", {epochs} epoch{'s' if epochs != 1 else ''} per run" if epochs else ""
    precision = c.precision  # issue 41: bf16's tables apart from fp32's
    extra += f", precision {precision}" if precision != "fp32" else ""
    return (f"{' + '.join(exp.names)}: {model} / {SCALING_LABELS.get(scaling, scaling)}{extra} "
            f"[experiment {exp.id}]")


def _differs_line(exp: Experiment) -> str:
    """What sets this experiment apart from the report's others (empty when it is alone)."""
    if not exp.differs:
        return ""
    cells = ", ".join(f"`{k}={json.dumps(v)}`" for k, v in exp.differs.items())
    return f"Differs from the other experiments in this report in: {cells}.\n\n"


def _series_order(exp: Experiment) -> list[str]:
    """Series by framework, then strategy (independent first), then RNN implementation."""
    def key(label: str) -> tuple:
        fw, impl, strategy = label.split(" / ", 2)
        return (fw, order_key(strategy.split("-")[0].split(" ")[0]), strategy, impl)
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
    buf.write(busy_line(experiments))
    if len(experiments) > 1:
        buf.write(f"{len(experiments)} different experiments are recorded here; each has its own "
                  "tables, and no figure mixes records of two of them.\n\n")
    for exp in sorted(experiments.values(), key=lambda e: (e.names, e.id)):
        buf.write(f"## {title(exp)}\n\n")
        buf.write(_differs_line(exp))
        buf.write("" if has_rounds(exp) else ONE_RUN_NOTE + "\n")
        order = _series_order(exp)
        scaling, epochs = exp.config.data.scaling, exp.config.measure.epochs
        for label in order:
            pts = exp.series[label]
            fw, impl, strategy = label.split(" / ", 2)
            buf.write(f"### {label}\n\n")
            model = exp.config.model
            # A custom model's rnn_impl is only what its builder was handed.
            impl_text = (f"model {model.builder}, rnn_impl {impl}"
                         if model.kind == "custom" else IMPL_NAMES.get(impl, impl))
            buf.write(f"{fw}, {impl_text}, strategy {strategy}.\n\n")
            if any(p.placement == "dedicated" for p in pts):
                buf.write("Speedup and efficiency are over worker ranks (servers excluded).\n\n")
            span = (f"run {epochs} epoch{'s' if epochs != 1 else ''}" if epochs
                    else f"process {pts[0].steps} batches")
            buf.write(series_table(pts, scaling, span, has_rounds(exp)))
            if not any(p.workers == 1 for p in pts):
                buf.write("\n(no 1-worker run recorded: speedup cannot be computed)\n")
            buf.write("\n")
        buf.write(side_by_side(exp.series, order))
        buf.write(comparisons(exp, order))
        buf.write(horovod_vs_native(exp.series, order))
        buf.write(padding_and_idle(exp.series, order))
    return buf.getvalue()


def has_rounds(exp: Experiment) -> bool:
    """Whether some point of ``exp`` has several runs: only then do spread columns exist."""
    return any(len(p.runs) > 1 for pts in exp.series.values() for p in pts)


ONE_RUN_NOTE = ("One run per point: no spread to show (min-max, MAD, paired ranges); "
                "`hvdscale sweep --repeats N` (N >= 2) adds the rounds that give them.\n")


def series_table(pts: list[Point], scaling: str, span: str, spread: bool) -> str:
    """One series' table in the seed notes' layout; the spread columns (min-max, MAD, the
    speedup's paired range) only where the experiment has rounds (``spread``)."""
    cols = ["Ranks", "Workers", "Batch per rank", "Global batch", f"Total time to {span} (s)",
            "Processing speed (words/s)"]
    cols += (["words/s min-max", "words/s 1.4826 MAD", "Speedup ratio [paired range]"] if spread
             else ["Speedup ratio"])
    cols += ["Efficiency (%)", "Step jitter (ms)", "Runs", "Host"]
    out = ["|" + "|".join(cols) + "|", "|" + ":--|" * len(cols)]
    for p in pts:
        per, total = _batch_cells(p, scaling)
        cells = [str(p.ranks), str(p.workers), per, total, f"{p.time_s:.3f}",
                 f"{p.words_per_s:.1f}{ci_cell(p)}{mark(p)}"]
        cells += [*range_cells(p), speedup_cell(p)] if spread else [speedup_cell(p)]
        cells += [_fmt(p.efficiency, ".1f"), f"{p.jitter_ms:.2f}", str(p.repeats), host_cell(p)]
        out.append("|" + "|".join(cells) + "|")
    return "\n".join(out) + "\n"


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
           "only wait at the end of the window); mean over ranks. CPU busy: the cores a rank "
           "kept busy (below its compute threads: it waited; above: MPI or Horovod spun).\n",
           "|Strategy|Ranks|Real tokens|Token slots|Padding (%)|Unbucketed padding (%)|"
           "Padded-to-max padding (%)|RNN work ratio|Idle per step (ms)|Idle (% of time)|"
           "Idle per rank (ms/step)|Out of batches (steps)|CPU busy (cores per rank)|",
           "|:--|:--|:--|:--|:--|:--|:--|:--|:--|:--|:--|:--|:--|"]
    for p in rows:
        out.append(f"|{p.strategy}{mark(p)}|{p.ranks}|{_fmt(p.real_tokens, '.0f')}|"
                   f"{_fmt(p.token_slots, '.0f')}|{_fmt(p.padded_pct, '.1f')}|"
                   f"{_fmt(p.unbucketed_padded_pct, '.1f')}|{_fmt(p.pad_to_max_padded_pct, '.1f')}|"
                   f"{_fmt(p.work_ratio, '.2f')}|"
                   f"{_fmt(p.idle_ms_per_step, '.2f')}|{_fmt(p.idle_pct, '.1f')}|"
                   f"{p.idle_per_rank}|{p.out_of_batches}|"
                   f"{_fmt(p.median(lambda r: r.cpu_busy), '.2f')}|")
    return "\n".join(out) + "\n\n"


def side_by_side(series: dict[str, list[Point]], order: list[str]) -> str:
    """One row per framework x strategy x RNN implementation: words/s and speedup at every
    rank count next to each other, and words/s relative to independent replicas of the same
    framework and implementation (the ideal) at the largest rank count both have."""
    if len(order) < 2:
        return ""
    ranks = sorted({p.ranks for pts in series.values() for p in pts})
    # A rank count where no series has a speedup (1 worker: 1 by definition) gets no column.
    sped = {p.ranks for pts in series.values() for p in pts if speedup_cell(p)}
    cols = [f"words/s N={n}" + (f"|speedup N={n}" if n in sped else "") for n in ranks]
    head = "|Framework|Strategy|RNN impl|" + "|".join(cols) + "|vs independent|"
    out = ["### Side by side: framework x strategy x RNN implementation\n", head,
           "|" + ":--|" * (4 + len(ranks) + len(sped))]
    for label in order:
        fw, impl, strategy = label.split(" / ", 2)
        by = {p.ranks: p for p in series[label]}
        row = [fw, strategy, impl]
        for n in ranks:
            p = by.get(n)
            row.append("" if p is None else wps_cell(p))
            if n in sped:
                row.append("" if p is None else speedup_cell(p))
        ideal = {p.ranks: p for p in series.get(f"{fw} / {impl} / independent", [])}
        both = [n for n in by if n in ideal]
        if strategy != "independent" and both:
            n = max(both)
            row.append(f"{ratio_cell(by[n], ideal[n])} at N={n}{mark(ideal[n])}")
        else:
            row.append("")
        out.append("|" + "|".join(row) + "|")
    return "\n".join(out) + "\n\n"


def to_csv(experiments: dict[str, Experiment]) -> str:
    """Every point as one CSV row (report.csv), experiments and series in the tables' order."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["experiment", "name", "model", "framework", "rnn_impl", "scaling", "bucketing",
                "pad_to", "epochs", "bucketing_mode", "strategy", "ranks", "workers",
                "batch_size", "tokens_per_batch", "steps", "time_s", "words_per_s", "speedup",
                "efficiency_pct", "step_jitter_ms", "runs", "padded_pct",
                "unbucketed_padded_pct", "idle_ms_per_step", "idle_pct", "words_per_s_min",
                "words_per_s_max", "words_per_s_mad", "speedup_min", "speedup_max",
                "paired_rounds", "busy_runs", "load_known_runs"])
    for exp in sorted(experiments.values(), key=lambda e: (e.names, e.id)):
        c = exp.config
        data = c.data
        for label in _series_order(exp):
            fw, impl, strategy = label.split(" / ", 2)
            for p in exp.series[label]:
                w.writerow([exp.id, " + ".join(exp.names), c.model.kind, fw,
                            impl, data.scaling, data.bucketing.enabled,
                            data.pad_to, c.measure.epochs,
                            _bucketing_mode(c), strategy, p.ranks, p.workers,
                            p.batch_size, p.tokens_per_batch, p.steps, f"{p.time_s:.4f}",
                            f"{p.words_per_s:.2f}", _fmt(p.speedup, ".4f"),
                            _fmt(p.efficiency, ".2f"), f"{p.jitter_ms:.3f}", p.repeats,
                            _fmt(p.padded_pct, ".2f"), _fmt(p.unbucketed_padded_pct, ".2f"),
                            _fmt(p.idle_ms_per_step, ".3f"), _fmt(p.idle_pct, ".2f"),
                            *_noise_csv(p)])
    return buf.getvalue()


def _noise_csv(p: Point) -> list[str]:
    """The CSV's spread, paired-speedup range and busy-run columns of one point."""
    s = p.speedup_range or {}
    if len(p.runs) < 2:  # one run has no spread: empty, not a min = max and a MAD of 0
        return ["", "", "", "", "", str(s.get("n", "")), str(p.busy_runs), str(p.load_known)]
    return [f"{p.wps_min:.2f}", f"{p.wps_max:.2f}", f"{p.wps_mad:.2f}",
            _fmt(s.get("min"), ".4f"), _fmt(s.get("max"), ".4f"), str(s.get("n", "")),
            str(p.busy_runs), str(p.load_known)]


def _cell(text: str) -> str:
    """One Markdown table cell: no newlines, no column breaks."""
    return " ".join(str(text).split()).replace("|", "\\|")


def horovod_timelines(records: Sequence[Record]) -> str:
    """One row per run that captured Horovod's timeline: where its allreduce time went."""
    rows = []
    for r in records:
        if not isinstance(r, RunRecord) or not r.timeline_summary:
            continue
        s = r.timeline_summary
        h = r.horovod_settings
        m = s["median"]
        t, c = h.fusion_threshold_mb, h.cycle_time_ms
        setting = (("default" if t is None else f"{t:g} MiB") + " / "
                   + ("default" if c is None else f"{c:g} ms") + f" / {h.overlap}")
        cells = [r.name, str(r.ranks), setting, _fmt(m.get("fused_buffers"), ".0f"),
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


def failed_points(failed: Sequence[FailedRecord]) -> str:
    """The failed points still open (see ``report.open_failures``), one row each."""
    if not failed:
        return ""
    md = "## Failed points\n\n|Experiment|Series|Ranks|Reason|\n|:--|:--|:--|:--|\n"
    for r in failed:
        cfg = r.config
        where = (f"{experiment_id(cfg)}|{_cell(series_label(cfg))}" if cfg is not None
                 else f"?|{_cell((r.key or {}).get('series', '?'))}")
        md += f"|{where}|{r.ranks}|{_cell(r.error)[:200]}|\n"
    return md + "\n"
