"""Length bucketing: words/s against padding and work, and the straggler cost at np=2.

Real ``mpirun -np N hvdscale run`` launches (horovod strategy) of an RNN language model over a
long-tailed (lognormal, mean 25, clipped to 3..100 tokens) synthetic corpus; every run trains
one whole epoch (``measure.epochs=1``), so all modes see the same sentences.

1. Throughput, np=1 and np=2, fused and loop: words/s of each batching mode against every batch
   padded to the maximum length (``data.pad_to=max``). Bucketing's ideal speedup over
   pad-to-max is the ratio of the two modes' work per real token; its efficiency is the
   measured speedup divided by that ideal (goal >= 0.9). Two denominators:

   * the padding ratio (token slots / real tokens), which is the work of the step-by-step loop
     (it runs every padded slot through every layer);
   * the work ratio that applies to the implementation: the model's multiply-adds per real
     token, with the recurrence counted on the slots it really runs (``rnn_work_slots`` in the
     record: the padded batch for the loop, the live sequences of each time step for the fused
     kernel's packed sequences) and the embedding-free output projection on every padded slot.
     For the loop it equals the padding ratio; for the fused kernel it is smaller, since
     padding never enters its recurrence.

2. Straggler cost at np=2, from the same runs: idle per step (a rank waiting for a slower
   rank's compute, or without a batch) for each ``data.bucketing.mode``: ``per_rank`` (each
   rank batches its own shard), ``aligned`` (every rank in one bucket per step) and ``global``
   (one global batch per step from one bucket, split across the ranks by padded slots).
   Goal for ``global``: idle below 5 % of rank time.

Modes run back to back in an order rotated every repeat, so machine noise spreads over all of
them; medians over repeats are reported, ratios are ratios of medians. Other workers load this
machine: every run records os.getloadavg() before and after it.

    python bench/bench_bucketing.py            # default: ~10 min on a quiet 2-core machine
    python bench/bench_bucketing.py --long     # every mode, more sentences and repeats

Writes bench/results/bucketing.json (every run's raw figures) and bench/results/bucketing.md.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bucketing_work import Run, model_work_ratio, pad_ratio, raw, rnn_ratio, work_imbalance

from hvdscale.records.run import RunRecord
from hvdscale.study.sweep.one_run import RunLaunch, launch_run

EMBED, HIDDEN, VOCAB = 128, 256, 8000
LM = ["model.kind=lm", f"model.embed_dim={EMBED}", f"model.hidden_size={HIDDEN}",
      "model.encoder_layers=1", f"model.src_vocab={VOCAB}",
      "data.synthetic.length_dist=lognormal", "data.synthetic.mean_len=25",
      "data.synthetic.min_len=3", "data.synthetic.max_len=100", "optim.name=sgd", "optim.lr=0.5",
      "strategy.name=horovod", "threads.intra_op=1", "measure.epochs=1", "measure.warmup_steps=3"]

TARGET = 0.9  # speedup over pad-to-max as a fraction of the ideal (ratio of work ratios)
IDLE_TARGET = 5.0  # % of rank time, global mode at np=2
TOKEN_BUDGET = 1000  # per rank: about 32 sentences of the mean length (25), padding included
BUCKETED = ["data.bucketing.enabled=true", f"data.bucketing.tokens_per_batch={TOKEN_BUDGET}"]
PAD_MAX = "pad to max"
# name -> (overrides, np values it runs at (None: all), in the default run)
MODES: dict[str, tuple[list[str], tuple[int, ...] | None, bool]] = {
    PAD_MAX: (["data.pad_to=max"], None, True),
    "pad to batch (no bucketing)": ([], None, False),
    "bucketed, 32 sentences, per_rank": (["data.bucketing.enabled=true"], (2,), False),
    "bucketed, per_rank": ([*BUCKETED, "data.bucketing.mode=per_rank"], None, True),
    "bucketed, aligned": ([*BUCKETED, "data.bucketing.mode=aligned"], (2,), False),
    "bucketed, global": ([*BUCKETED, "data.bucketing.mode=global"], (2,), True),
    "equal tokens (fixed length 25)": (["data.synthetic.length_dist=fixed",
                                        "data.synthetic.max_len=25"], (2,), False),
}


def run_point(np_: int, sets: list[str], out: str) -> Run:
    """One ``hvdscale run`` launch at ``np_`` ranks; its record, with the load around it."""
    load_before = os.getloadavg()
    # Generous: other workers load this machine, and a loaded pad-to-max loop run is slow.
    rec = launch_run(np_, "configs/demo.yaml", out, sets,
                     RunLaunch(env={"TF_CPP_MIN_LOG_LEVEL": "2"}, timeout_s=3600))
    return Run(rec, list(load_before), list(os.getloadavg()))


def sweep(modes: list[str], base: list[str], np_: int, repeats: int,
          out: str) -> dict[str, list[Run]]:
    """Every mode ``repeats`` times, the order rotated per repeat; the records per mode."""
    recs: dict[str, list[Run]] = {m: [] for m in modes}
    for r in range(repeats):
        for m in modes[r % len(modes):] + modes[: r % len(modes)]:
            t = time.monotonic()
            run = run_point(np_, [*base, *MODES[m][0]], out)
            recs[m].append(run)
            print(f"  np={np_} repeat {r + 1}/{repeats} {m:34s} "
                  f"words/s={run.rec.words_per_s:7.0f} "
                  f"idle={100 * run.rec.idle_fraction:5.1f}% "
                  f"load={run.loadavg_before[0]:.1f} ({time.monotonic() - t:.0f}s)",
                  file=sys.stderr, flush=True)
    return recs


WORDS_PER_S = operator.attrgetter("words_per_s")


def med(runs: list[Run], f: Callable[[RunRecord], float]) -> float:
    """The median of ``f`` over the runs' records."""
    return statistics.median(f(r.rec) for r in runs)


def idle_ms_of_rank(rec: RunRecord, i: int) -> float:
    """The ``i``-th computing rank's idle milliseconds per step."""
    return rec.idle_per_rank[i].idle_ms_per_step


def throughput_table(title: str, impl: str, recs: dict[str, list[Run]]) -> tuple[str, dict]:
    """One rank count's throughput table (markdown) and its figures per mode."""
    applies = "padding" if impl == "loop" else "model work"
    wps0 = med(recs[PAD_MAX], WORDS_PER_S)
    pr0, mw0 = med(recs[PAD_MAX], pad_ratio), med(recs[PAD_MAX], model_work_ratio)
    lines = [f"**{title}**\n",
             "|Batching|words/s (median)|Padding ratio|RNN work ratio|Model work ratio|"
             "Speedup over pad-to-max|Efficiency vs padding ratio|Efficiency vs model work|"
             "Idle (% of rank time)|",
             "|:--|--:|--:|--:|--:|--:|--:|--:|--:|"]
    summary = {}
    for mode, rs in recs.items():
        wps, pr, mw = med(rs, WORDS_PER_S), med(rs, pad_ratio), \
            med(rs, model_work_ratio)
        rr = med(rs, rnn_ratio)
        idle = med(rs, lambda r: 100 * r.idle_fraction)
        speedup = wps / wps0
        eff_pad, eff_work = speedup / (pr0 / pr), speedup / (mw0 / mw)
        summary[mode] = {"words_per_s": wps, "padding_ratio": pr, "rnn_work_ratio": rr,
                         "model_work_ratio": mw, "speedup": speedup,
                         "efficiency_vs_padding": eff_pad, "efficiency_vs_work": eff_work,
                         "idle_pct": idle, "runs": [raw(r) for r in rs]}
        lines.append(f"|{mode}|{wps:.0f}|{pr:.2f}|{rr:.2f}|{mw:.2f}|{speedup:.2f}|"
                     f"{eff_pad:.2f}|{eff_work:.2f}|{idle:.1f}|")
    key = "efficiency_vs_padding" if impl == "loop" else "efficiency_vs_work"
    verdict = [f"{m}: {'met' if v[key] >= TARGET else 'missed'} ({v[key]:.2f})"
               for m, v in summary.items() if m.startswith("bucketed")]
    lines.append(f"\nGoal (efficiency >= {TARGET} against the {applies} ratio, the one that "
                 f"applies to rnn_impl={impl}): " + "; ".join(verdict) + ".")
    return "\n".join(lines) + "\n", summary


def straggler_table(recs_by_impl: dict[str, dict[str, list[Run]]], base: list[str],
                    np_: int) -> tuple[str, dict]:
    """The straggler table (markdown) at ``np_`` ranks and its figures per mode."""
    lines = ["|RNN|Batches|Idle per step, mean over ranks (ms)|Idle (% of rank time)|"
             "Idle implied by the work split (%)|"
             "Idle per rank (ms/step)|Steps without a batch per rank|Batches per rank|"
             "Step time median (ms)|words/s|",
             "|:--|:--|--:|--:|--:|:--|:--|:--|--:|--:|"]
    summary: dict = {}
    for impl, recs in recs_by_impl.items():
        for mode, rs in recs.items():
            if mode == PAD_MAX or mode.startswith("pad to batch"):
                continue
            idle = med(rs, lambda r: r.idle_ms_per_step)
            frac = med(rs, lambda r: 100 * r.idle_fraction)
            last = rs[-1].rec.idle_per_rank
            per = " / ".join(
                f"r{p.rank}: {med(rs, lambda r, i=i: idle_ms_of_rank(r, i)):.1f}"
                for i, p in enumerate(last))
            out_of = " / ".join(f"r{p.rank}: {p.idle_steps}" for p in last)
            batches = " / ".join(str(c) for c in rs[-1].rec.measure.batches_per_rank)
            step = med(rs, lambda r: 1e3 * r.step_median_s)
            wps = med(rs, WORDS_PER_S)
            implied = work_imbalance([*base, f"model.rnn_impl={impl}", *MODES[mode][0]], np_)
            summary[f"{impl}: {mode}"] = {"idle_ms_per_step": idle, "idle_pct": frac,
                                          "implied_idle_pct": implied["idle_pct"],
                                          "step_ms": step, "words_per_s": wps,
                                          "steps": rs[-1].rec.measured_steps}
            lines.append(f"|{impl}|{mode}|{idle:.1f}|{frac:.1f}|{implied['idle_pct']:.1f}|"
                         f"{per}|{out_of}|{batches}|{step:.1f}|{wps:.0f}|")
    glob = [(k, v["idle_pct"]) for k, v in summary.items() if k.endswith("global")]
    verdict = "; ".join(f"{k}: {'met' if p < IDLE_TARGET else 'missed'} ({p:.1f} %)"
                        for k, p in glob)
    lines.append(f"\nGoal (global mode idle < {IDLE_TARGET:.0f} % of rank time): {verdict}.")
    return "\n".join(lines) + "\n", summary


def implied_only(base: list[str], np_: int, impls: list[str], out: str, json_path: str) -> int:
    """The work-split table alone: every mode that runs at np_, no timing."""
    lines = [f"# Idle implied by the work split at np={np_} (no runs, no timing)\n",
             "Each rank's batches of one epoch rebuilt offline as the ranks build them; a "
             "rank's work per step in multiply-adds; the share of rank time a rank would wait "
             "if time followed work.\n",
             "|RNN|Batches|Steps|Idle implied (%)|Steps without a batch per rank|",
             "|:--|:--|--:|--:|:--|"]
    result: dict = {"np": np_, "base": base}
    for impl in impls:
        for mode, (_, at, _) in MODES.items():
            if mode == PAD_MAX or (at is not None and np_ not in at):
                continue
            r = work_imbalance([*base, f"model.rnn_impl={impl}", *MODES[mode][0]], np_)
            result[f"{impl}: {mode}"] = r
            lines.append(f"|{impl}|{mode}|{r['steps']}|{r['idle_pct']:.1f}|"
                         f"{' / '.join(map(str, r['steps_without_batch']))}|")
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        Path(out).write_text(text)
    if json_path:
        Path(json_path).write_text(json.dumps(result, indent=1))
    return 0


def main() -> int:
    """Run the benchmark (or only the work split's table); write its markdown and JSON."""
    args = _parse_args()
    repeats = args.repeats or (3 if args.long else 2)
    sentences = args.sentences or (640 if args.long else 320)
    base = [*LM, f"data.synthetic.sentences_per_rank={sentences}", "data.batch_size=32"]
    nps = [int(n) for n in args.np.split(",")]
    impls = args.impls.split(",")
    started, load0 = time.monotonic(), os.getloadavg()
    if args.implied_only:
        return implied_only(base, max(nps), impls, args.out, args.json)
    md = _intro(repeats, sentences, load0)
    result: dict = {"args": vars(args), "repeats": repeats, "sentences_per_rank": sentences,
                    "loadavg_start": list(load0)}
    with tempfile.TemporaryDirectory() as out:
        md.append("## Throughput: bucketing vs padding and work\n")
        by_np_impl = _throughput(args, nps, impls, base, repeats, out, md, result)
        np_ = max(nps)
        if np_ > 1:
            _straggler(by_np_impl[np_], base, np_, md, result)
    result["loadavg_end"] = list(os.getloadavg())
    result["wall_s"] = time.monotonic() - started
    md.append(f"\nWall time {result['wall_s'] / 60:.1f} min; load average at the end "
              f"{result['loadavg_end'][0]:.1f}.\n")
    text = "\n".join(md)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


def _parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--long", action="store_true",
                    help="every mode (also pad to batch, 32-sentence batches, aligned, equal "
                    "tokens), 640 sentences per rank, 3 repeats (about 60 min)")
    ap.add_argument("--np", default="1,2", help="rank counts (the straggler table: the largest)")
    ap.add_argument("--repeats", type=int, default=None, help="default 2 (3 with --long)")
    ap.add_argument("--impls", default="fused,loop", help="RNN implementations to measure")
    ap.add_argument("--sentences", type=int, default=None,
                    help="sentences per rank (default 320, 640 with --long)")
    ap.add_argument("--implied-only", action="store_true",
                    help="only the idle the work split implies, for every mode (seconds, no "
                    "runs)")
    ap.add_argument("--out", default="bench/results/bucketing.md",
                    help="write the markdown here ('' : print only)")
    ap.add_argument("--json", default="bench/results/bucketing.json",
                    help="write the figures and every run's raw record here ('' : none)")
    return ap.parse_args()


def _intro(repeats: int, sentences: int, load0: tuple[float, float, float]) -> list[str]:
    """The report's title and the paragraphs that say what was run and what the ratios mean."""
    return [f"# Length bucketing (horovod, {repeats} repeats, medians)\n",
            f"RNN LM (embed {EMBED}, hidden {HIDDEN}, vocab {VOCAB}), {sentences} lognormal-length "
            f"sentences per rank (mean 25, 3..100 tokens), token budget {TOKEN_BUDGET} per rank "
            "(weak scaling: global mode's global budget is that times the ranks), one whole "
            "epoch measured per run after 3 warm-up steps. Machine: "
            f"{os.cpu_count()} cores, 1 compute thread per rank, load average "
            f"{load0[0]:.1f} at the start (other workers share the machine).\n",
            "Padding ratio: token slots / real tokens. RNN work ratio: slots the recurrence "
            "runs / real tokens (loop: every padded slot; fused: packed sequences, only the live "
            "ones, so 1.00). Model work ratio: multiply-adds per real token relative to no "
            "padding, the recurrence on its slots and the output projection on every padded "
            "slot. Efficiency = speedup over pad-to-max / (pad-to-max ratio / this mode's "
            "ratio). The ratio that applies: padding for the loop, model work for the fused "
            "kernel.\n"]


def _throughput(args: argparse.Namespace, nps: list[int], impls: list[str], base: list[str],
                repeats: int, out: str, md: list[str],
                result: dict) -> dict[int, dict[str, dict[str, list[Run]]]]:
    """Sweep the modes for every rank count and implementation, adding each throughput table
    to ``md`` and its figures to ``result``; the records, by rank count and implementation."""
    by_np_impl: dict[int, dict[str, dict[str, list[Run]]]] = {}
    for np_ in nps:
        for impl in impls:
            print(f"np={np_}, rnn_impl={impl}", file=sys.stderr)
            modes = [m for m, (_, at, default) in MODES.items()
                     if (at is None or np_ in at) and (default or args.long)]
            recs = sweep(modes, [*base, f"model.rnn_impl={impl}"], np_, repeats, out)
            by_np_impl.setdefault(np_, {})[impl] = recs
            table, summary = throughput_table(f"np={np_}, rnn_impl={impl}", impl, recs)
            md.append(table)
            result[f"throughput_np{np_}_{impl}"] = summary
            if args.json:  # kept as it grows: a run that fails later loses nothing before
                Path(args.json).write_text(json.dumps(result, indent=1))
    return by_np_impl


def _straggler(recs: dict[str, dict[str, list[Run]]], base: list[str], np_: int,
               md: list[str], result: dict) -> None:
    """The straggler section at ``np_`` ranks (from the same runs), into ``md`` and ``result``."""
    md.append(f"## Straggler cost at np={np_}: idle time per step (same runs)\n")
    md.append("Idle: time a rank waits at a step for a slower rank's forward/backward "
              "(a step without a batch waits the slowest rank's whole compute), as a "
              "share of the ranks' measured time. Idle implied by the work split: the "
              "same epoch's batches rebuilt offline, each rank's work per step in "
              "multiply-adds, and the share of time ranks would wait if time followed "
              "work (no machine noise in it).\n")
    table, summary = straggler_table(recs, base, np_)
    md.append(table)
    result["straggler"] = summary


if __name__ == "__main__":
    sys.exit(main())
