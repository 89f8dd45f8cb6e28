"""Warm-up exclusion, words/s and spread. numpy and scipy only: no framework imports.

Steps are numbered like tf_cnn_benchmarks: warm-up steps are negative (-W..-1) and the measured
window is 0..N-1, bounded by barriers so every rank's window covers the same steps.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np


def t95(dof: int) -> float:
    """Two-sided 95% Student t quantile for ``dof`` degrees of freedom (scipy.stats; nan for
    none)."""
    if dof < 1:
        return float("nan")
    from scipy import stats  # here, not at the top: ranks import this module at start-up

    return float(stats.t.ppf(0.975, dof))


def spread(values: list[float] | np.ndarray) -> dict[str, float]:
    """Median, robust jitter (1.4826 * MAD), mean and its 95% interval half-width."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return {"n": 0, "median": float("nan"), "jitter": float("nan"), "mean": float("nan"),
                "ci95": float("nan"), "min": float("nan"), "max": float("nan")}
    med = float(np.median(x))
    ci = t95(x.size - 1) * float(np.std(x, ddof=1)) / math.sqrt(x.size) if x.size > 1 else 0.0
    return {"n": int(x.size), "median": med,
            "jitter": 1.4826 * float(np.median(np.abs(x - med))),
            "mean": float(x.mean()), "ci95": ci, "min": float(x.min()), "max": float(x.max())}


@dataclass
class StepMeter:
    """One rank's per-step timings and token counts; warm-up steps are kept apart."""

    warmup_steps: int
    step_times: list[float] = field(default_factory=list)
    warmup_times: list[float] = field(default_factory=list)
    words: int = 0
    loss_tokens: int = 0
    padded_tokens: int = 0
    sentences: int = 0
    loss_sum: float = 0.0
    compute_times: list[float] = field(default_factory=list)
    step_words: list[int] = field(default_factory=list)  # the record's raw words, per step
    idle_steps: int = 0
    batches: int = 0
    window_start: float = 0.0
    window_end: float = 0.0
    cpu_start: float = 0.0  # this process's CPU seconds (all its threads) at the window's ends
    cpu_end: float = 0.0
    _t: float = 0.0

    def start_step(self) -> None:
        self._t = time.perf_counter()

    def end_step(self, step: int, words: int, loss_tokens: int, padded: int, sentences: int,
                 loss_sum: float, compute_s: float = 0.0, idle: bool = False) -> None:
        """Close step ``step`` (negative during warm-up); only measured steps count.

        ``compute_s`` is this rank's own forward/backward time in the step; ``idle`` marks a
        step in which this computing rank had no batch.
        """
        dt = time.perf_counter() - self._t
        if step < 0:
            self.warmup_times.append(dt)
            return
        self.step_times.append(dt)
        self.compute_times.append(compute_s)
        self.step_words.append(words)
        self.idle_steps += int(idle)
        self.batches += int(sentences > 0)
        self.words += words
        self.loss_tokens += loss_tokens
        self.padded_tokens += padded
        self.sentences += sentences
        self.loss_sum += loss_sum

    def open_window(self) -> None:
        self.window_start = time.perf_counter()
        self.cpu_start = time.process_time()

    def close_window(self) -> None:
        self.window_end = time.perf_counter()
        self.cpu_end = time.process_time()

    @property
    def window_s(self) -> float:
        return self.window_end - self.window_start

    def rank_summary(self) -> dict:
        """What this rank contributes to the run's record (gathered to rank 0)."""
        return {"words": self.words, "loss_tokens": self.loss_tokens,
                "padded_tokens": self.padded_tokens, "sentences": self.sentences,
                "loss_sum": self.loss_sum, "window_s": self.window_s,
                "step_times": self.step_times, "warmup_times": self.warmup_times,
                "compute_times": self.compute_times, "step_words": self.step_words,
                "idle_steps": self.idle_steps,
                "batches": self.batches, "cpu_s": self.cpu_end - self.cpu_start}


def idle_times(ranks: list[dict], synchronous: bool = True) -> dict:
    """Straggler cost: how long each computing rank waited for slower ranks' compute.

    Synchronous strategies meet at every step, so a rank waits there for the slowest rank's
    compute: its idle time in step s is max over ranks of compute(s) minus its own compute(s)
    (a whole step without a batch waits the slowest rank's entire compute). Replicas that never
    meet (``independent``) wait only once, at the end of the window: the most busy time of any
    rank minus their own. Communication itself is not idle time.

    Args:
        ranks: the ``rank_summary`` of each computing rank.
        synchronous: whether the strategy synchronises the ranks at every step.
    """
    if not ranks or not ranks[0].get("compute_times"):
        return {}
    if synchronous:
        compute = np.array([r["compute_times"] for r in ranks])
        idle = (compute.max(axis=0) - compute).sum(axis=1)
    else:
        busy = np.array([sum(r["step_times"]) for r in ranks])
        idle = busy.max() - busy
    steps = len(ranks[0]["compute_times"])
    window = max(r["window_s"] for r in ranks)
    per_rank = [{"rank": r["rank"], "idle_s": float(i), "idle_ms_per_step": 1e3 * float(i) / steps,
                 "idle_steps": int(r.get("idle_steps", 0)), "batches": int(r.get("batches", 0)),
                 "compute_s": float(sum(r["compute_times"]))}
                for r, i in zip(ranks, idle, strict=True)]
    return {"synchronous": synchronous, "steps": steps, "per_rank": per_rank,
            "idle_ms_per_step": 1e3 * float(idle.mean()) / steps,
            "idle_fraction": float(idle.sum()) / (len(ranks) * window) if window > 0 else 0.0,
            "ranks_out_of_batches": [p["rank"] for p in per_rank if p["idle_steps"] > 0]}


def rank_times(ranks: list[dict]) -> list[dict]:
    """Per computing rank: words, window, measured steps and the sums of its step and compute
    times (what ``hvdscale.study.report.breakdown`` splits a point's loss of efficiency with)."""
    return [{"rank": r["rank"], "words": int(r["words"]), "window_s": float(r["window_s"]),
             "steps": len(r["step_times"]), "step_s": float(np.sum(r["step_times"])),
             "compute_s": float(np.sum(r["compute_times"]))} for r in ranks]


def summarize(ranks: list[dict], compute_ranks: list[int], synchronous: bool = True) -> dict:
    """Run-level figures from every rank's ``rank_summary``.

    words/s is the real tokens of all ranks over the longest rank's measured window, never a
    rank's rate times N. ``synchronous`` says whether the ranks meet at every step (see
    ``idle_times``).
    """
    comp = [ranks[r] for r in compute_ranks]
    window = max(r["window_s"] for r in ranks)
    words = sum(r["words"] for r in comp)
    real = words
    padded = sum(r["padded_tokens"] for r in comp)
    loss_tokens = sum(r["loss_tokens"] for r in comp)
    # A step of the job lasts as long as its slowest rank.
    step_matrix = np.array([r["step_times"] for r in comp])
    job_steps = step_matrix.max(axis=0) if step_matrix.size else np.array([])
    return {
        "window_s": window,
        "words": words,
        "words_per_s": words / window if window > 0 else float("nan"),
        "per_rank_words_per_s": [r["words"] / r["window_s"] if r["window_s"] > 0 else 0.0
                                 for r in comp],
        "sentences": sum(r["sentences"] for r in comp),
        "loss_tokens": loss_tokens,
        "padded_tokens": padded,
        "padded_fraction": 1.0 - real / padded if padded else 0.0,
        "idle": idle_times(comp, synchronous),
        "rank_times": rank_times(comp),
        "step_time": spread(job_steps),
        # Medians of tenths of the measured steps: a long run's drift shows here.
        "step_time_deciles": [float(np.median(c)) for c in np.array_split(job_steps, 10)
                              if len(c)] if job_steps.size >= 10 else [],
        "warmup_time_s": max(sum(r["warmup_times"]) for r in ranks),
        "mean_loss": sum(r["loss_sum"] for r in comp) / loss_tokens if loss_tokens else None,
        # Cores a computing rank kept busy: below its compute threads, it waited (blocking
        # communication, a slower rank); above, MPI progress or Horovod's thread spun too.
        "cpu_busy": (sum(r["cpu_s"] / r["window_s"] for r in comp) / len(comp)
                     if comp and all(r["window_s"] > 0 for r in comp) else None),
        "raw": raw_steps(compute_ranks, comp),
    }


def _us(times: list[float]) -> list[float]:
    return [round(t, 6) for t in times]  # a microsecond: far below any step's jitter


def raw_steps(compute_ranks: list[int], comp: list[dict]) -> dict:
    """The record's ``raw``: each computing rank's measured step, compute and warm-up times
    and words per step, so every figure above recomputes from the record alone."""
    return {"ranks": list(compute_ranks), "step_s": [_us(r["step_times"]) for r in comp],
            "compute_s": [_us(r["compute_times"]) for r in comp],
            "words": [list(r["step_words"]) for r in comp],
            "warmup_s": [_us(r["warmup_times"]) for r in comp]}
