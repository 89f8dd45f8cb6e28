"""``measure.target_rel_ci``: the interval of words/s from blocks of steps, and when a run stops
(hvdscale.train.blocks), on one process with a world of one rank and a clock the test drives."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from hvdscale.config import load_config
from hvdscale.core.meter import t95
from hvdscale.corpora.corpus import Batch
from hvdscale.errors import ConfigError
from hvdscale.study.report.noise import ci_cell
from hvdscale.study.report.points import Point
from hvdscale.train import blocks
from hvdscale.train.blocks import BlockMeter, ratio_interval


class OneRank:
    rank, size = 0, 1

    def allreduce_sum(self, values: np.ndarray) -> np.ndarray:
        return np.asarray(values, dtype=np.float64)

    def bcast(self, obj: Any, root: int = 0) -> Any:
        return obj


def test_the_interval_is_the_ratio_estimators() -> None:
    words, secs = [1000.0, 1100.0, 900.0, 1000.0], [1.0, 1.0, 1.0, 1.0]
    rate, half = ratio_interval(words, secs)
    assert rate == pytest.approx(1000.0)
    # Equal block times: the ratio's interval is the mean rate's t interval.
    rates = np.array(words) / np.array(secs)
    assert half == pytest.approx(t95(3) * rates.std(ddof=1) / math.sqrt(4))
    # Unequal blocks weigh by their time: the figure is all words over all seconds.
    rate, _ = ratio_interval([100.0, 300.0], [1.0, 2.0])
    assert rate == pytest.approx(400.0 / 3.0)
    assert ratio_interval([5.0], [1.0])[1] == math.inf


def _measure(monkeypatch: pytest.MonkeyPatch, words: list[int], step_s: float,
             **sets: float) -> tuple[BlockMeter, int]:
    cfg = load_config(None, [f"measure.{k}={v}" for k, v in sets.items()])
    clock = [0.0]
    monkeypatch.setattr(blocks.time, "perf_counter", lambda: clock[0])
    meter = BlockMeter(cfg.measure, OneRank())
    assert not meter.after_step(-1, None)  # a warm-up step counts for nothing
    meter.begin()
    for step, w in enumerate(words):
        clock[0] += step_s
        # An LM batch of one sentence with ``w`` real target tokens: ``w`` words.
        batch = Batch(np.zeros((1, w)), np.array([w]), None, np.zeros((1, w)), np.array([w]))
        if meter.after_step(step, batch):
            return meter, step + 1
    return meter, len(words)


def test_steady_blocks_stop_as_soon_as_three_meet_the_target(monkeypatch) -> None:
    meter, steps = _measure(monkeypatch, [100] * 100, 0.1, target_rel_ci=0.02, block_steps=5)
    assert steps == 15 and meter.stopped == "target met"
    s = meter.summary()
    assert s["met"] and s["rel_ci95"] < 1e-9 and len(s["blocks"]) == 3
    assert s["words_per_s"] == pytest.approx(1000.0)
    assert [b["words"] for b in s["blocks"]] == [500, 500, 500]


def test_noisy_blocks_run_to_max_seconds_and_say_they_missed(monkeypatch) -> None:
    noisy = [100 if (i // 5) % 2 else 300 for i in range(1000)]
    meter, steps = _measure(monkeypatch, noisy, 0.1, target_rel_ci=0.02, block_steps=5,
                            max_seconds=3.0)
    assert steps == 30 and meter.stopped == "max_seconds"  # 6 blocks of 0.5 s
    s = meter.summary()
    assert not s["met"] and s["rel_ci95"] > 0.02


def test_a_target_cannot_be_set_with_epochs_or_until_and_must_be_a_fraction() -> None:
    with pytest.raises(ConfigError, match=r"measure\.target_rel_ci must be a fraction"):
        load_config(None, ["measure.target_rel_ci=2"])
    with pytest.raises(ConfigError, match=r"cannot be set with measure\.epochs"):
        load_config(None, ["measure.target_rel_ci=0.02", "measure.epochs=1"])
    with pytest.raises(ConfigError, match=r"measure\.block_steps must be >= 1"):
        load_config(None, ["measure.block_steps=0"])
    cfg = load_config(None, ["measure.target_rel_ci=0.02", "measure.max_seconds=30"])
    assert cfg.measure.run_deadline_s() == 600 + 60 + 30 * (10 + 10)


def test_the_report_prints_the_interval_and_the_runs_that_missed() -> None:
    p = Point("horovod", 2, 2, 32, 20, 1.0, 1000.0, 3, 1.0, "")
    assert ci_cell(p) == ""
    p.rel_ci95, p.ci_target, p.ci_missed = 0.018, 0.02, 0
    assert ci_cell(p) == " +-1.8%"
    p.rel_ci95, p.ci_missed = 0.031, 1
    assert ci_cell(p) == " +-3.1% (target +-2% missed in 1 of 3)"


def _stopped_coverage(anytime: bool, runs: int = 1500) -> float:
    """Blocks of words/s 1000 x lognormal(0, 4 %) (1 s each), stopped at the first look whose
    interval is within +-2 % (at most 60 blocks): how often that interval holds 1000."""
    rng = np.random.default_rng(7)
    held = 0
    for _ in range(runs):
        words = list(1000.0 * np.exp(rng.normal(0, 0.04, 60)))
        for n in range(3, 61):
            rate, half = ratio_interval(words[:n], [1.0] * n, anytime=anytime)
            if half / rate <= 0.02 or n == 60:
                held += abs(rate - 1000.0) <= half
                break
    return held / runs


def test_stopping_as_soon_as_the_interval_is_narrow_keeps_its_coverage() -> None:
    """Issue 62: the precision target looks after every block. The fixed 95 % t interval,
    stopped at the first narrow one, covers less than 95 %; the procedure's, at its look's
    level, keeps 95 %."""
    assert _stopped_coverage(anytime=False) < 0.93
    assert _stopped_coverage(anytime=True) >= 0.95
