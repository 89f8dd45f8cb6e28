"""Length bucketing: words/s against padding, and the straggler cost of uneven batches.

Two measurements, each by real ``mpirun -np N hvdscale run`` launches (horovod strategy) on an
RNN language model over a long-tailed (lognormal, mean 25, clipped to 3..100 tokens) synthetic
corpus; every run trains whole epochs (``measure.epochs``), so all modes see the same sentences.

1. Throughput: words/s with length bucketing vs every batch padded to the maximum length
   (``data.pad_to=max``), plus plain batches padded to their own longest sentence. The padding
   ratio of a mode is its token slots / real tokens; bucketing's ideal speedup over pad-to-max is
   the ratio of the two padding ratios, and the target is a measured speedup of at least 0.9 of
   it. Both RNN implementations are measured: the fused kernel runs packed sequences (padding
   never enters its recurrence, only the embedding and the softmax), the loop runs every step.
   At np > 1 also with ``data.bucketing.align_ranks`` (every rank in one bucket per step).
2. Straggler cost at np=N: idle time per step (a rank waiting for a slower rank's compute, or a
   rank out of batches) with uneven bucketed batches (fixed sentence count, so token counts and
   batch counts differ by rank) vs batches to a token budget vs equal-token batches
   (fixed-length sentences), and both bucketed kinds with the ranks aligned on one bucket.

Modes run back to back in an order rotated every repeat, so machine noise spreads over all of
them; medians over repeats are reported, ratios are ratios of medians.

    python bench/bench_bucketing.py [--np 1,2] [--repeats 3] [--impls fused,loop]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LM = ["model.kind=lm", "model.embed_dim=128", "model.hidden_size=256", "model.encoder_layers=1",
      "model.src_vocab=8000", "data.synthetic.length_dist=lognormal",
      "data.synthetic.mean_len=25", "data.synthetic.min_len=3", "data.synthetic.max_len=100",
      "optim.name=sgd", "optim.lr=0.5", "strategy.name=horovod", "threads.intra_op=1"]

TARGET = 0.9  # bucketing's speedup over pad-to-max, as a fraction of the padding-ratio gain
TOKEN_BUDGET = 1000  # about 32 sentences of the mean length (25) per batch, with padding
THROUGHPUT = {
    "pad to max": ["data.pad_to=max"],
    "pad to batch (no bucketing)": [],
    "bucketed, 32 sentences": ["data.bucketing.enabled=true"],
    f"bucketed, {TOKEN_BUDGET} tokens": ["data.bucketing.enabled=true",
                                         f"data.bucketing.tokens_per_batch={TOKEN_BUDGET}"],
    f"bucketed, {TOKEN_BUDGET} tokens, ranks aligned": [
        "data.bucketing.enabled=true", f"data.bucketing.tokens_per_batch={TOKEN_BUDGET}",
        "data.bucketing.align_ranks=true"],
}
STRAGGLER = {
    "uneven (bucketed, 32 sentences)": ["data.bucketing.enabled=true"],
    f"token budget (bucketed, {TOKEN_BUDGET} tokens)": [
        "data.bucketing.enabled=true", f"data.bucketing.tokens_per_batch={TOKEN_BUDGET}"],
    "uneven, ranks aligned on a bucket (32 sentences)": [
        "data.bucketing.enabled=true", "data.bucketing.align_ranks=true"],
    f"token budget, ranks aligned on a bucket ({TOKEN_BUDGET} tokens)": [
        "data.bucketing.enabled=true", f"data.bucketing.tokens_per_batch={TOKEN_BUDGET}",
        "data.bucketing.align_ranks=true"],
    "equal tokens (fixed length 25)": ["data.synthetic.length_dist=fixed",
                                       "data.synthetic.max_len=25"],
}


THROUGHPUT_NOTE = """\
Why the fused kernel stays below its padding ratio: it runs packed sequences, so padding never
enters its recurrence; padding every batch to the maximum wastes only the embedding, the softmax
projection and the loss on padded slots, and the padding ratio overstates what bucketing can
save it. The step-by-step loop runs every padded time step (each with a fixed cost as well), so
bucketing saves it the whole padding ratio or more. At np > 1 the straggler cost below comes on
top: an RNN step lasts as long as its longest sentence, so when one rank draws a bucket of long
sentences the others wait; aligning the ranks on one bucket per step recovers part of it.
"""


def run_point(np_: int, sets: list[str], out: str) -> dict:
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    cmd = ["mpirun", "-np", str(np_), "hvdscale", "run", "configs/demo.yaml", "--out", out]
    for kv in sets:
        cmd += ["--set", kv]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise SystemExit(f"run failed: {' '.join(cmd)}\n{r.stderr[-3000:]}")
    return json.loads(Path(out, "results.jsonl").read_text().splitlines()[-1])


def sweep(modes: dict[str, list[str]], base: list[str], np_: int, repeats: int,
          out: str) -> dict[str, list[dict]]:
    names = list(modes)
    recs: dict[str, list[dict]] = {m: [] for m in names}
    for r in range(repeats):
        for m in names[r % len(names):] + names[: r % len(names)]:
            t = time.monotonic()
            rec = run_point(np_, [*base, *modes[m]], out)
            recs[m].append(rec)
            print(f"  np={np_} repeat {r + 1}/{repeats} {m:46s} words/s={rec['words_per_s']:8.0f} "
                  f"idle={rec['idle']['idle_ms_per_step']:6.1f} ms/step "
                  f"({time.monotonic() - t:.0f}s)", file=sys.stderr, flush=True)
    return recs


def med(recs: list[dict], f) -> float:
    return statistics.median(f(r) for r in recs)


def pad_ratio(rec: dict) -> float:
    w = rec["padding"]["window"]
    return w["slots"] / w["words"]


def throughput_table(impl: str, recs: dict[str, list[dict]]) -> tuple[str, dict]:
    base = next(iter(THROUGHPUT))
    wps0, pr0 = med(recs[base], lambda r: r["words_per_s"]), med(recs[base], pad_ratio)
    lines = [f"**{impl}**\n",
             "|Batching|words/s (median)|Padding ratio (slots / real tokens)|Padded (%)|"
             "Speedup over pad-to-max|Padding ratio vs pad-to-max|Speedup / padding ratio|",
             "|:--|--:|--:|--:|--:|--:|--:|"]
    summary = {}
    for mode, rs in recs.items():
        wps, pr = med(rs, lambda r: r["words_per_s"]), med(rs, pad_ratio)
        speedup, ideal = wps / wps0, pr0 / pr
        summary[mode] = {"words_per_s": wps, "padding_ratio": pr, "speedup": speedup,
                         "padding_ratio_gain": ideal, "fraction_of_ideal": speedup / ideal,
                         "all_words_per_s": [r["words_per_s"] for r in rs]}
        lines.append(f"|{mode}|{wps:.0f}|{pr:.2f}|{100 * (1 - 1 / pr):.1f}|{speedup:.2f}|"
                     f"{ideal:.2f}|{speedup / ideal:.2f}|")
    verdict = [f"{m}: {'met' if v['fraction_of_ideal'] >= TARGET else 'missed'} "
               f"({v['fraction_of_ideal']:.2f})" for m, v in summary.items() if "bucketed" in m]
    lines.append(f"\nTarget (speedup >= {TARGET} x padding ratio): " + "; ".join(verdict) + ".")
    return "\n".join(lines) + "\n", summary


def rank_idle(rec: dict, i: int) -> float:
    return rec["idle"]["per_rank"][i]["idle_ms_per_step"]


def straggler_table(recs: dict[str, list[dict]]) -> tuple[str, dict]:
    lines = ["|Batches|Idle per step, mean over ranks (ms)|Idle (% of rank time)|"
             "Idle per rank (ms/step)|Steps out of batches per rank|Batches per rank|"
             "Step time median (ms)|words/s|",
             "|:--|--:|--:|:--|:--|:--|--:|--:|"]
    summary = {}
    for mode, rs in recs.items():
        idle = med(rs, lambda r: r["idle"]["idle_ms_per_step"])
        frac = med(rs, lambda r: 100 * r["idle"]["idle_fraction"])
        last = rs[-1]["idle"]["per_rank"]
        per = " / ".join(f"r{p['rank']}: {med(rs, lambda r, i=i: rank_idle(r, i)):.1f}"
                         for i, p in enumerate(last))
        out_of = " / ".join(f"r{p['rank']}: {p['idle_steps']}" for p in last)
        batches = " / ".join(str(c) for c in rs[-1]["measure"]["batches_per_rank"])
        step = med(rs, lambda r: 1e3 * r["step_time"]["median"])
        wps = med(rs, lambda r: r["words_per_s"])
        summary[mode] = {"idle_ms_per_step": idle, "idle_pct": frac, "step_ms": step,
                         "words_per_s": wps}
        lines.append(f"|{mode}|{idle:.1f}|{frac:.1f}|{per}|{out_of}|{batches}|{step:.1f}|"
                     f"{wps:.0f}|")
    return "\n".join(lines) + "\n", summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--np", default="1,2", help="rank counts for the throughput part; the "
                    "straggler part runs at the largest")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--straggler-repeats", type=int, default=5,
                    help="repeats of the straggler part (idle time is noisier)")
    ap.add_argument("--impls", default="fused,loop", help="RNN implementations to measure")
    ap.add_argument("--sentences", type=int, default=640, help="sentences per rank")
    ap.add_argument("--batch", type=int, default=32, help="sentences per batch per rank")
    ap.add_argument("--parts", default="throughput,straggler")
    ap.add_argument("--out", default="bench/results/bucketing.md",
                    help="write the markdown here ('' : print only)")
    ap.add_argument("--json", default="bench/results/bucketing.json",
                    help="write the figures as JSON here ('' : none)")
    args = ap.parse_args()
    base = [*LM, f"data.synthetic.sentences_per_rank={args.sentences}",
            f"data.batch_size={args.batch}", "measure.epochs=1", "measure.warmup_steps=3"]
    parts = args.parts.split(",")
    nps = [int(n) for n in args.np.split(",")]
    md = [f"# Length bucketing (horovod, {args.repeats} repeats, medians)\n",
          f"RNN LM (embed 128, hidden 256, vocab 8000), {args.sentences} lognormal-length "
          f"sentences per rank (mean 25, 3..100 tokens), {args.batch} sentences per batch per "
          "rank, one whole epoch measured per run after 3 warm-up steps. Machine: "
          f"{os.cpu_count()} cores, 1 compute thread per rank.\n"]
    result: dict = {"repeats": args.repeats, "args": vars(args)}
    with tempfile.TemporaryDirectory() as out:
        if "throughput" in parts:
            md.append("## Throughput: bucketing vs padding\n")
            md.append("Speedup / padding ratio is the measured speedup over pad-to-max divided "
                      "by the ratio of padding ratios (its ideal); the target is >= 0.9.\n")
            for np_ in nps:
                for impl in args.impls.split(","):
                    print(f"throughput, np={np_}, rnn_impl={impl}", file=sys.stderr)
                    # One rank has nobody to align with: skip the aligned mode at np=1.
                    modes = {m: v for m, v in THROUGHPUT.items()
                             if np_ > 1 or "aligned" not in m}
                    recs = sweep(modes, [*base, f"model.rnn_impl={impl}"], np_,
                                 args.repeats, out)
                    table, summary = throughput_table(f"np={np_}, rnn_impl={impl}", recs)
                    md.append(table)
                    result[f"throughput_np{np_}_{impl}"] = summary
            md.append(THROUGHPUT_NOTE)
        np_ = max(nps)
        if "straggler" in parts and np_ > 1:
            print("straggler cost", file=sys.stderr)
            md.append(f"## Straggler cost at np={np_}: idle time per step "
                      f"({args.straggler_repeats} repeats)\n")
            md.append("Idle: time a rank waits at a step for a slower rank's forward/backward "
                      "(a step with no batch left waits the slowest rank's whole compute). "
                      "Fused LSTM.\n")
            recs = sweep(STRAGGLER, [*base, "model.rnn_impl=fused"], np_,
                         args.straggler_repeats, out)
            table, summary = straggler_table(recs)
            md.append(table)
            result["straggler"] = summary
    text = "\n".join(md)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
