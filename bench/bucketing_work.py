"""The work of length bucketing's batches, for bench_bucketing.py: per real token in a run's
record (padding, the recurrence's slots, the model's multiply-adds), and the straggler cost the
data alone implies, with every rank's batches of the epoch rebuilt in this process (no run, no
timing, no machine noise); and what the bench keeps of each run (its record's figures and the
host's load around it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hvdscale.config.model import ModelConfig
from hvdscale.records.run import RunRecord
from hvdscale.study.stepcost.step_flops import FWD_BWD, lstm_flops_per_token


def pad_ratio(rec: RunRecord) -> float:
    """Token slots per real token of a run's measured window (the loop's work ratio)."""
    w = rec.padding.window
    return w.slots / w.words


def rnn_ratio(rec: RunRecord) -> float:
    """Slots the recurrence ran per real token (loop: every padded slot; fused: live ones)."""
    w = rec.padding.window
    return w.rnn_work_slots / w.words


def model_work_ratio(rec: RunRecord) -> float:
    """Multiply-adds per real token relative to an unpadded batch: the recurrence on the slots
    it runs, the output projection on every padded slot (the embedding is a lookup)."""
    rnn, proj = work_per_slot(rec.model_config)
    w = rec.padding.window
    return (rnn * w.rnn_work_slots + proj * w.slots) / ((rnn + proj) * w.words)


def work_per_slot(model: ModelConfig) -> tuple[int, int]:
    """(recurrence, output projection) training flops per token slot of the LM, as
    hvdscale.study.stepcost.step_flops counts them (the LM projects onto ``src_vocab``)."""
    h = model.hidden_size
    rnn = lstm_flops_per_token(model.embed_dim, h, model.encoder_layers)
    return rnn, FWD_BWD * 2 * h * model.src_vocab


def work_imbalance(sets: list[str], np_: int) -> dict:
    """The straggler cost the data alone implies, free of machine noise: every rank's batches
    of the measured epoch rebuilt in this process (as the ranks build them), each step's work
    per rank in multiply-adds (loop: every padded slot through every layer; fused: the
    recurrence on live slots only), and the share of rank time a rank would wait if time were
    proportional to work: 1 - sum over steps of the mean rank's work / sum of the most."""
    from hvdscale.config import load_config
    from hvdscale.core.batching import build_schedule, local_summary, make_plan
    from hvdscale.corpora.corpus import load_corpus

    cfg = load_config(Path("configs/demo.yaml"), sets)
    rnn, proj = work_per_slot(cfg.model)
    mode = cfg.data.bucketing.mode if cfg.data.bucketing.enabled else "per_rank"
    plans = [make_plan(load_corpus(cfg.data, "lm", cfg.model.src_vocab, 0, w, np_), cfg.data,
                       "lm", w, np_) for w in range(np_)]
    measure = load_config(None, ["measure.epochs=1", "measure.warmup_steps=0"]).measure
    gathered = [local_summary(measure, p, mode) for p in plans]
    streams = [list(build_schedule(measure, p, gathered, mode)[1]) for p in plans]

    def work(b) -> float:
        if b is None:
            return 0.0
        live = b.words if cfg.model.rnn_impl == "fused" else b.padded_tokens
        return rnn * live + proj * b.padded_tokens

    w = np.array([[work(b) for b in st] for st in streams])
    return {"steps": int(w.shape[1]), "idle_pct": 100 * float(1 - w.mean(0).sum() / w.max(0).sum()),
            "steps_without_batch": [sum(b is None for b in st) for st in streams]}


@dataclass(frozen=True)
class Run:
    """One launch: its record and the host's load averages around it."""

    rec: RunRecord
    loadavg_before: list[float]
    loadavg_after: list[float]


def raw(run: Run) -> dict:
    """What the JSON keeps of one run."""
    rec = run.rec
    measured = rec.measure
    return {"words_per_s": rec.words_per_s, "window_s": rec.window_s,
            "padding_ratio": pad_ratio(rec), "rnn_work_ratio": rnn_ratio(rec),
            "model_work_ratio": model_work_ratio(rec),
            "idle_pct": 100 * rec.idle_fraction,
            "idle_ms_per_step": rec.idle_ms_per_step,
            "idle_per_rank_ms": [p.idle_ms_per_step for p in rec.idle_per_rank],
            "idle_steps_per_rank": [p.idle_steps for p in rec.idle_per_rank],
            "step_ms_median": 1e3 * rec.step_median_s,
            "steps": measured.steps,
            "batches_per_rank": measured.batches_per_rank,
            "bucketing_mode": measured.bucketing_mode,
            "loadavg_before": run.loadavg_before, "loadavg_after": run.loadavg_after}
