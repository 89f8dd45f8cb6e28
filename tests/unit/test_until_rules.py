"""``UntilTracker``'s rules one step at a time, on one rank: what it counts, when it evaluates,
why it stops (target, time cap, step cap, divergence), each at its exact boundary, and every
field it writes. The evaluation losses are scripted (``Scripted``: the Evaluator's interface,
each evaluation costing a set time on a clock the test moves), so a boundary is hit to the
bit; tests/unit/test_until.py runs the same tracker in real training runs, and
``make_tracker`` runs here on a real one-rank world and a real model."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from hvdscale.config import load_config
from hvdscale.core.world import World
from hvdscale.corpora.corpus import Batch
from hvdscale.corpora.evalset import make_eval_set
from hvdscale.errors import HvdscaleError
from hvdscale.train import until as until_module
from hvdscale.train.until import UntilTracker, make_tracker

EVAL_COST = 0.5
"""Clock seconds one scripted evaluation takes."""


class Clock:
    """``time.perf_counter`` of hvdscale.train.until, moved by the test."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class Scripted:
    """The Evaluator's interface (rank, world, seconds, evalset, evaluate, agree) with the
    losses given in order; the summed counters come back as one rank sums them."""

    def __init__(self, losses: list[float], clock: Clock, rank: int = 0) -> None:
        self.world, self.rank, self.seconds = SimpleNamespace(rank=0), rank, 0.0
        self.evalset = SimpleNamespace(sentences=7, tokens=70)
        self.losses, self.clock, self.calls = list(losses), clock, []

    def evaluate(self, extra: list[float]) -> tuple[float, np.ndarray]:
        self.calls.append(list(extra))
        self.clock.t += EVAL_COST
        self.seconds += EVAL_COST
        return self.losses.pop(0), np.array(extra, dtype=np.float64)

    def agree(self, flag: bool) -> bool:
        self.calls.append(("agree", flag))
        return bool(flag)


class OneRank(World):
    """A job of one rank: each collective over one rank is its own input."""

    rank, size, local_rank, local_size, backend = 0, 1, 0, 1, "one"

    def barrier(self) -> None:
        pass

    def allreduce_sum(self, values: np.ndarray) -> np.ndarray:
        return np.array(values, dtype=np.float64)

    def allgather(self, obj: Any) -> list[Any]:
        return [obj]

    def bcast(self, obj: Any, root: int = 0) -> Any:
        return obj


def _batch() -> Batch:
    """One sentence: 3 source and 2 target tokens (5 words)."""
    return Batch(src=np.array([[5, 6, 7]]), src_len=np.array([3]), tgt_in=np.array([[2, 5]]),
                 tgt_out=np.array([[5, 3]]), tgt_len=np.array([2]))


@pytest.fixture()
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(until_module, "time", SimpleNamespace(perf_counter=c))
    return c


def _tracker(sets: list[str], losses: list[float], clock: Clock, floor: float | None = None,
             sentences: int = 4, rank: int = 0) -> tuple[UntilTracker, Scripted]:
    measure = load_config(None, sets).measure
    ev = Scripted(losses, clock, rank)
    return UntilTracker(measure, ev, floor, sentences), ev  # type: ignore[arg-type]


TARGET = ["measure.eval_every=2", "measure.until.metric=loss", "measure.until.target=1.0",
          "measure.until.max_time_s=1000", "measure.until.max_steps=100"]


def test_a_fresh_tracker_and_warm_up_steps(clock: Clock) -> None:
    tr, ev = _tracker(["measure.eval_every=1"], [2.0], clock)
    assert (tr.reached, tr.stop_reason, tr.words, tr.sentences, tr.curve, tr.steps,
            tr.warmup_steps, tr.start_loss, tr.diverged, tr.noise, tr.last_batch, tr.begun,
            tr.next_due_s) == (None, "steps done", 0, 0, [], 0, 0, None, False, None, None,
                               False, 0.0)
    b = _batch()
    # Warm-up (negative steps) counts its words, never evaluates, even when every step is due.
    assert tr.after_step(-1, b) is False and tr.after_step(-1, b) is False
    assert (tr.warmup_steps, tr.words, tr.sentences, tr.steps, ev.calls) == (2, 10, 2, 0, [])
    assert tr.last_batch is b
    with pytest.raises(HvdscaleError) as e:  # step 0 is measured: the window must be open
        tr.after_step(0, b)
    assert str(e.value) == "UntilTracker.begin() was not called when the window opened"
    tr.begin()
    clock.t = 101.0
    assert tr.after_step(0, None) is False  # evaluated (no target: never stops)
    assert (tr.steps, tr.words, tr.last_batch, ev.calls) == (1, 15, None, [[15, 3, 1.0]])
    assert _tracker(TARGET, [], clock)[0].reached is False  # a target: not reached yet


def test_the_curve_point_and_the_summary_to_the_target(clock: Clock) -> None:
    tr, ev = _tracker(TARGET, [2.0, 0.5], clock)
    b = _batch()
    tr.after_step(-1, b)  # one warm-up update
    tr.begin()
    clock.t = 101.0
    assert tr.after_step(0, b) is False and ev.calls == []  # step 1 of every 2: not due
    clock.t = 102.0
    assert tr.after_step(1, b) is False  # due: 2.0 is above the target
    assert ev.calls == [[15, 3, 2.0]] and tr.next_due_s == 2.0
    assert tr.curve == [{"step": 2, "updates": 3, "words": 15, "sentences": 3, "train_s": 2.0,
                         "wall_s": 2.5, "eval_s": 0.5, "loss": 2.0, "perplexity": math.exp(2.0),
                         "epochs": 0.75}]
    clock.t = 103.5
    assert tr.after_step(2, b) is False
    clock.t = 104.5
    assert tr.after_step(3, b) is True  # train_s 104.5 - 100 - 0.5 = 4.0; 0.5 meets 1.0
    assert (tr.reached, tr.stop_reason, tr.diverged) == (True, "target reached", False)
    s = tr.summary({"lr": 0.1})
    assert s == {
        "evaluation": {"on_rank": 0, "how": "one rank, exact zeros added by the others",
                       "sentences": 7, "tokens": 70, "every_steps": 2, "every_s": 0.0},
        "floor_loss": None, "floor_perplexity": None,
        "until": {"metric": "loss", "target": 1.0, "max_time_s": 1000.0, "max_steps": 100},
        "reached": True, "stop": "target reached", "start_loss": None, "diverged": False,
        "time_to_target_s": 4.0, "wall_s": 5.0, "train_s": 4.0, "eval_s": 1.0, "steps": 4,
        "warmup_steps": 1, "updates": 5, "words": 25, "epochs": 1.25, "final_loss": 0.5,
        "final_perplexity": math.exp(0.5), "optim": {"lr": 0.1}, "curve": tr.curve,
        "noise_scale": None}


def test_the_caps_stop_at_their_exact_values(clock: Clock) -> None:
    # The time cap: training seconds equal to max_time_s stop the run, target not reached.
    tr, _ = _tracker([*TARGET[:-2], "measure.until.max_time_s=3", "measure.until.max_steps=9"],
                     [2.0, 2.0], clock)
    tr.begin()
    clock.t = 102.0
    assert tr.after_step(1, None) is False  # train_s 2.0 < 3
    clock.t = 103.5  # train_s 103.5 - 100 - 0.5 = 3.0
    assert tr.after_step(3, None) is True
    assert (tr.reached, tr.stop_reason) == (False, "time cap")
    assert tr.summary({})["time_to_target_s"] is None
    # The step cap: evaluated at max_steps although not due, and stops there.
    tr, ev = _tracker([*TARGET[:-1], "measure.until.max_steps=3"], [2.0, 2.0], clock)
    tr.begin()
    assert tr.after_step(0, None) is False and ev.calls == []
    assert tr.after_step(1, None) is False and len(ev.calls) == 1  # steps 2 < 3
    assert tr.after_step(2, None) is True and len(ev.calls) == 2
    assert (tr.reached, tr.stop_reason, tr.steps) == (False, "step cap", 3)
    # Without a target, max_steps means nothing: step 3 is not evaluated.
    tr, ev = _tracker(["measure.eval_every=2", "measure.until.max_steps=3"], [2.0], clock)
    tr.begin()
    assert [tr.after_step(i, None) for i in range(3)] == [False, False, False]
    assert len(ev.calls) == 1 and tr.stop_reason == "steps done"


def test_divergence_is_above_the_start_loss_or_not_finite(clock: Clock) -> None:
    tr, ev = _tracker(["measure.eval_every=1"], [3.0, 3.0, 3.0000001], clock)
    tr.measure_start()
    assert tr.start_loss == 3.0 and ev.seconds == 0.0 and ev.calls == [[]]  # no training time
    tr.begin()
    assert tr.after_step(0, None) is False and not tr.diverged  # equal to the start: sound
    assert tr.after_step(1, None) is False  # no target: a diverged run is left to finish
    assert (tr.diverged, tr.reached, tr.stop_reason) == (True, None, "diverged")
    for bad in (math.nan, math.inf, -math.inf):
        tr, _ = _tracker(TARGET, [bad], clock)
        tr.begin()
        assert tr.after_step(1, None) is True
        assert (tr.diverged, tr.reached, tr.stop_reason) == (True, False, "diverged")
    # Diverged and below the target: divergence decides first, never a reached target.
    tr, _ = _tracker(TARGET, [0.5, 0.7], clock)
    tr.measure_start()
    tr.begin()
    assert tr.after_step(1, None) is True
    assert (tr.diverged, tr.reached, tr.stop_reason) == (True, False, "diverged")


def test_the_three_metrics_meet_at_their_targets(clock: Clock) -> None:
    loss, _ = _tracker(TARGET, [], clock)
    assert loss.meets(1.0) and not loss.meets(1.0000001)
    ppl, _ = _tracker(["measure.eval_every=1", "measure.until.metric=perplexity",
                       f"measure.until.target={math.exp(1.5)!r}"], [], clock)
    assert ppl.meets(1.5) and not ppl.meets(1.5000001)
    ff, _ = _tracker(["measure.eval_every=1", "measure.until.metric=floor_fraction",
                      "measure.until.target=0.25"], [], clock, floor=1.0)
    edge = 1.0 + math.log(1.25)  # perplexity 1.25 x the floor's
    assert ff.meets(edge - 1e-9) and not ff.meets(edge + 1e-9)
    at_floor, _ = _tracker(["measure.eval_every=1", "measure.until.metric=floor_fraction",
                            "measure.until.target=0"], [], clock, floor=1.0)
    assert at_floor.meets(1.0)  # the floor itself meets a fraction of 0
    assert ff.summary({})["floor_perplexity"] == math.e
    assert until_module._ppl(None) is None and until_module._ppl(800.0) == math.exp(700.0)
    with pytest.raises(HvdscaleError) as e:
        _tracker(["measure.eval_every=1", "measure.until.metric=floor_fraction"], [], clock)
    assert str(e.value) == ("measure.until.metric=floor_fraction needs a source with a known "
                            "floor (data.synthetic.kind markov or mapped, or uniform lm)")


def test_a_clock_schedule_and_an_evaluator_on_another_rank(clock: Clock) -> None:
    # eval_every_s: the evaluator's clock decides (agreed), due at exactly the interval; the
    # next is due an interval after the shared training seconds.
    tr, ev = _tracker(["measure.eval_every_s=3"], [2.0, 2.0], clock)
    tr.begin()
    clock.t = 102.0
    assert tr.after_step(0, None) is False and ev.calls == [("agree", False)]
    clock.t = 103.0
    assert tr.after_step(1, None) is False
    assert ev.calls[1:] == [("agree", True), [0, 0, 3.0]] and tr.next_due_s == 6.0
    # The evaluator on another rank: this rank adds no training seconds to the sum.
    tr, ev = _tracker(["measure.eval_every=1"], [2.0], clock, rank=1)
    tr.begin()
    clock.t = 105.0
    tr.after_step(0, None)
    assert ev.calls == [[0, 0, 0.0]] and tr.curve[0]["train_s"] == 0.0
    # No corpus size: no epochs.
    tr, _ = _tracker(["measure.eval_every=1"], [2.0], clock, sentences=0)
    tr.begin()
    tr.after_step(0, None)
    assert tr.curve[0]["epochs"] is None


def test_the_noise_probe_runs_on_the_last_batch_outside_training_time(clock: Clock) -> None:
    tr, ev = _tracker(["measure.eval_every=1"], [2.0], clock)
    seen: list[Any] = []

    class Probe:  # the probe's interface: its seconds go to the evaluation's
        def probe(self, batch: Batch | None) -> float:
            seen.append(batch)
            return 0.25

        def summary(self) -> dict[str, Any]:
            return {"b_simple": 1.0}

    tr.noise = Probe()  # type: ignore[assignment]
    tr.begin()
    ev.seconds = 1.0  # earlier evaluations' seconds: the probe's add to them
    clock.t = 103.0
    b = _batch()
    tr.after_step(0, b)
    assert seen == [b] and ev.seconds == 1.0 + 0.25 + EVAL_COST
    assert ev.calls == [[5, 1, 1.75]]  # 3.0 on the clock less 1.0 evaluating, 0.25 probing
    assert tr.summary({})["noise_scale"] == {"b_simple": 1.0}


def test_make_tracker_on_a_real_model() -> None:
    pytest.importorskip("torch")
    from tests.exactness import adapter

    sets = ["model.kind=lm", "model.embed_dim=8", "model.hidden_size=8", "model.src_vocab=20",
            "model.tgt_vocab=20", "data.synthetic.kind=markov", "data.synthetic.eval_sentences=9",
            "strategy.name=horovod"]
    cfg = load_config(None, sets)
    assert make_tracker(cfg, OneRank(), None, True, (20, 30), 5) is None  # nothing asks
    for ask in ("measure.eval_every=3", "measure.eval_every_s=2",
                "measure.until.metric=loss"):
        extra = [ask] + (["measure.eval_every=1"] if "until" in ask else [])
        cfg = load_config(None, sets + extra)
        # (20, 30): the language model's vocabulary is the source's; the eval set is drawn
        # from it (a 30-word one has another floor, and ids the model has no row for).
        tr = make_tracker(cfg, OneRank(), adapter(cfg), True, (20, 30), 5)
        assert tr is not None and tr.corpus_sentences == 5
        want = make_eval_set(cfg.data, "lm", 20, 20, 64, 0).floor_loss
        assert want != make_eval_set(cfg.data, "lm", 30, 20, 64, 0).floor_loss
        assert tr.evaluator.evalset.sentences == 9 and tr.floor == want
        assert tr.floor is not None and 0 < tr.floor < tr.start_loss < math.log(20) + 1
        assert tr.evaluator.seconds == 0.0 and tr.noise is not None
        assert tr.noise.why_not == "needs at least two ranks (one rank has no small/big batch pair)"
    # A dedicated server's corpus counts 0 in the sum; with global bucketing every rank
    # already holds the whole corpus and no sum is taken.
    for local in ([], ["data.bucketing.enabled=true", "data.bucketing.mode=per_rank"]):
        cfg = load_config(None, [*sets, "measure.eval_every=1", *local])
        assert make_tracker(cfg, OneRank(), adapter(cfg), False, (20, 20), 5) \
            .corpus_sentences == 0
    cfg = load_config(None, [*sets, "measure.eval_every=1", "data.bucketing.enabled=true",
                              "data.bucketing.mode=global"])
    assert make_tracker(cfg, OneRank(), adapter(cfg), False, (20, 20), 5).corpus_sentences == 5
