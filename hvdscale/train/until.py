"""``measure.eval_every`` and ``measure.until``: evaluate during training and stop at a quality
target or a time cap, recording the whole evaluation curve.

Clocks: ``wall_s`` runs from the opening of the measured window (before measured step 0, so
the time counts every measured step); ``train_s`` is wall time minus the time
spent evaluating and agreeing (the evaluator rank's clock, shared with the result, so every
rank takes the same decision). The measured throughput window excludes evaluation too
(hvdscale.train.loop). With ``eval_every`` (steps) the ranks know the evaluation steps without
talking; with ``eval_every_s`` the evaluator's clock decides after each step (one small
broadcast per step, outside training time). Warm-up steps (``measure.warmup_steps``) are real
updates: their batches count in ``words``/``sentences`` and in each point's ``updates``; their
time does not (it holds the one-off allocation and graph tracing, and stays out of the clock
exactly as it stays out of the throughput window). A target never reached stops at the cap with
status ok and ``reached: false``.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from hvdscale.config import MeasureConfig
from hvdscale.corpora.corpus import Batch
from hvdscale.corpora.evalset import make_eval_set
from hvdscale.errors import HvdscaleError
from hvdscale.train.evaluate import Evaluator
from hvdscale.train.noise_scale import NoiseProbe, why_not


class UntilTracker:
    """Counts the training, evaluates when due, and says when to stop (every rank)."""

    def __init__(self, measure: MeasureConfig, evaluator: Evaluator, floor_loss: float | None,
                 corpus_sentences: int) -> None:
        """
        Args:
            measure: the ``measure`` section.
            evaluator: evaluates and shares the result.
            floor_loss: the source's known per-token loss floor (None: unknown).
            corpus_sentences: training sentences of all workers together (one epoch).
        """
        until = measure.until
        if until.metric == "floor_fraction" and floor_loss is None:
            raise HvdscaleError("measure.until.metric=floor_fraction needs a source with a known "
                                "floor (data.synthetic.kind markov or mapped, or uniform lm)")
        self.measure, self.evaluator, self.floor = measure, evaluator, floor_loss
        self.corpus_sentences = corpus_sentences
        self.words = self.sentences = 0
        self.curve: list[dict[str, Any]] = []
        self.reached: bool | None = None if not until.active else False
        self.stop_reason = "steps done"
        self.next_due_s = measure.eval_every_s
        self.start = 0.0
        self.begun = False
        self.steps = 0
        self.warmup_steps = 0
        self.start_loss: float | None = None
        """Held-out loss of the initial weights: above it (or NaN), a run has diverged."""
        self.diverged = False
        self.noise: NoiseProbe | None = None  # the gradient noise scale's probe (issue 33)
        self.last_batch: Batch | None = None  # the batch the probe differentiates

    def begin(self) -> None:
        """Start the clocks (where the loop opens the measured window)."""
        self.start, self.begun = time.perf_counter(), True

    def train_s(self) -> float:
        """Training time so far on this rank (wall time less evaluation)."""
        return time.perf_counter() - self.start - self.evaluator.seconds

    def after_step(self, step: int, batch: Batch | None) -> bool:
        """Count step ``step`` (negative: warm-up); evaluate if due; True when the run should
        stop (never during warm-up)."""
        self.last_batch = batch
        if batch is not None:
            self.words += batch.words
            self.sentences += batch.sentences
        if step < 0:
            self.warmup_steps += 1
            return False
        if not self.begun:  # a caller that never opened the window would time from 1970
            raise HvdscaleError("UntilTracker.begin() was not called when the window opened")
        self.steps = step + 1
        m = self.measure
        if m.eval_every:
            due = self.steps % m.eval_every == 0
        else:
            due = self.evaluator.agree(self.train_s() >= self.next_due_s)
        last = m.until.active and self.steps >= m.until.max_steps
        if not due and not last:
            return False
        return self._evaluate(last)

    def _evaluate(self, last: bool) -> bool:
        if self.noise is not None:  # its time is excluded from training as evaluation's is
            self.evaluator.seconds += self.noise.probe(self.last_batch)
        own_train = self.train_s() if self.evaluator.world.rank == self.evaluator.rank else 0.0
        loss, sums = self.evaluator.evaluate([self.words, self.sentences, own_train])
        words, sentences, train_s = int(sums[0]), int(sums[1]), float(sums[2])
        self.next_due_s = train_s + self.measure.eval_every_s
        self.curve.append({
            "step": self.steps, "updates": self.warmup_steps + self.steps, "words": words,
            "sentences": sentences, "train_s": train_s,
            "wall_s": time.perf_counter() - self.start, "eval_s": self.evaluator.seconds,
            "loss": loss, "perplexity": _ppl(loss),
            "epochs": sentences / self.corpus_sentences if self.corpus_sentences else None})
        until = self.measure.until
        if self._diverges(loss):  # before the target: a diverged run never counts as reaching
            self.diverged, self.reached = True, (False if until.active else None)
            self.stop_reason = "diverged"
            return until.active
        if not until.active:
            return False
        if self.meets(loss):
            self.reached, self.stop_reason = True, "target reached"
            return True
        if train_s >= until.max_time_s:
            self.stop_reason = "time cap"
            return True
        if last:
            self.stop_reason = "step cap"
            return True
        return False

    def measure_start(self) -> None:
        """Evaluate the initial weights (every rank, before the first update): the loss a run
        must stay at or below not to count as diverged. Its time is no training time, and the
        clock does not run yet, so it is kept out of the evaluation seconds too."""
        before = self.evaluator.seconds
        self.start_loss = self.evaluator.evaluate([])[0]
        self.evaluator.seconds = before

    def _diverges(self, loss: float) -> bool:
        """A NaN or infinite loss, or one above the initial weights' (when measured)."""
        if not math.isfinite(loss):
            return True
        return self.start_loss is not None and loss > self.start_loss

    def meets(self, loss: float) -> bool:
        """Whether a per-token eval loss meets ``measure.until``."""
        u = self.measure.until
        if u.metric == "loss":
            return loss <= u.target
        if u.metric == "perplexity":
            return _ppl(loss) <= u.target
        assert self.floor is not None
        return _ppl(loss) <= _ppl(self.floor) * (1.0 + u.target)

    def summary(self, optim: dict[str, Any]) -> dict[str, Any]:
        """The record's ``quality`` section."""
        last = self.curve[-1] if self.curve else {}
        u = self.measure.until
        return {
            "evaluation": {"on_rank": self.evaluator.rank, "how": "one rank, exact zeros added "
                           "by the others", "sentences": self.evaluator.evalset.sentences,
                           "tokens": self.evaluator.evalset.tokens,
                           "every_steps": self.measure.eval_every,
                           "every_s": self.measure.eval_every_s},
            "floor_loss": self.floor, "floor_perplexity": _ppl(self.floor),
            "until": {"metric": u.metric, "target": u.target, "max_time_s": u.max_time_s,
                      "max_steps": u.max_steps} if u.active else None,
            "reached": self.reached, "stop": self.stop_reason,
            "start_loss": self.start_loss, "diverged": self.diverged,
            "time_to_target_s": last.get("train_s") if self.reached else None,
            "wall_s": last.get("wall_s"), "train_s": last.get("train_s"),
            "eval_s": self.evaluator.seconds, "steps": self.steps,
            "warmup_steps": self.warmup_steps, "updates": self.warmup_steps + self.steps,
            "words": last.get("words"),
            "epochs": last.get("epochs"), "final_loss": last.get("loss"),
            "final_perplexity": last.get("perplexity"), "optim": optim, "curve": self.curve,
            "noise_scale": self.noise.summary() if self.noise is not None else None}


def _ppl(loss: float | None) -> float | None:
    """Perplexity of a per-token loss in nats (capped so a diverged run stays finite JSON)."""
    if loss is None:
        return None
    return math.exp(min(loss, 700.0))


def make_tracker(cfg: Any, world: Any, adapter: Any, computes: bool, vocab: tuple[int, int],
                 corpus_sentences: int) -> UntilTracker | None:
    """The run's tracker, or None when nothing asks for evaluation (today's measurement).

    Args:
        cfg: the run config (its ``data``, ``model`` and ``measure`` sections are read).
        world: the job's ranks (every rank calls this: it holds two small collectives).
        adapter: this rank's model.
        computes: whether this rank trains a model (False on a dedicated server).
        vocab: the model's source and target vocabulary sizes.
        corpus_sentences: this rank's training sentences (the whole corpus in global mode).
    """
    m = cfg.measure
    if not (m.eval_every or m.eval_every_s or m.until.active):
        return None
    evalset = make_eval_set(cfg.data, cfg.model.data_kind, vocab[0], vocab[1], m.eval_batch_size,
                            m.eval_max_sentences)
    whole = cfg.data.bucketing.enabled and cfg.data.bucketing.mode == "global"
    # hvd: one small sum at set-up: the epoch's sentences over all workers
    total = corpus_sentences if whole else int(world.allreduce_sum(
        np.array([corpus_sentences if computes else 0], dtype=np.float64))[0])
    tracker = UntilTracker(m, Evaluator(world, adapter, evalset, computes), evalset.floor_loss,
                           total)
    tracker.measure_start()
    tracker.noise = NoiseProbe(world, adapter, computes,
                               why_not(cfg.strategy.name, world.size, m.noise_scale))
    return tracker
