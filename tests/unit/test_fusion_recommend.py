"""The fusion recommendation comes from PAIRED per-round ratios over Horovod's defaults, on crafted
records: it picks the setting with the best paired ratio (not the best unpaired median), reports
the spread, and refuses to recommend when the spread straddles 1.0."""

from __future__ import annotations

import pytest

from hvdscale.study.fusion_report import analyze, markdown
from hvdscale.study.fusion_settings import Setting
from hvdscale.study.recommend import NO_WINNER, paired_ratios, recommend

DEFAULTS = Setting(128.0, 1.0, "hooks")
OFF = Setting(0.0, 1.0, "hooks")
SLOW_CYCLE = Setting(128.0, 5.0, "hooks")
AFTER = Setting(128.0, 1.0, "after-backward")


def _recs(*wps: float) -> list[dict]:
    """One record per round, as ``hvdscale fusion`` reads them back."""
    return [{"words_per_s": w, "step_time": {"median": 0.05}} for w in wps]


def test_picks_the_best_paired_ratio_not_the_best_median() -> None:
    # The rounds drift (machine slower in round 2); AFTER beats the defaults by 4-6 % in every
    # round, SLOW_CYCLE has the best unpaired median only because of one fast round.
    res = analyze([(DEFAULTS, _recs(100, 60, 100)), (OFF, _recs(90, 55, 92)),
                   (SLOW_CYCLE, _recs(120, 50, 104)), (AFTER, _recs(105, 63.6, 104))])
    rec = res["recommendation"]
    assert rec["candidate"] == rec["recommended"] == AFTER.label
    assert res["best"]["label"] == AFTER.label
    r = rec["ratios"][AFTER.label]
    assert r["median"] == pytest.approx(1.05) and r["n"] == 3
    assert (r["min"], r["max"]) == (pytest.approx(1.04), pytest.approx(1.06))
    # SLOW_CYCLE's median words/s (104) is the highest, but its paired ratios straddle 1.0.
    assert max(res["table"], key=lambda row: row["words_per_s"])["label"] == SLOW_CYCLE.label
    md = markdown(res, "t")
    assert f"**Recommended: {AFTER.label}**" in md
    assert "x1.050 (rounds 1.040–1.060, n=3" in md


def test_refuses_when_the_best_spread_straddles_one() -> None:
    # The best median ratio (1.10) comes with a round below the defaults: noise, not a gain.
    res = analyze([(DEFAULTS, _recs(100, 100, 100)), (OFF, _recs(90, 92, 91)),
                   (AFTER, _recs(110, 95, 120))])
    rec = res["recommendation"]
    assert rec["candidate"] == AFTER.label and rec["recommended"] is None
    assert rec["ratios"][AFTER.label]["min"] == pytest.approx(0.95)
    assert rec["ratios"][AFTER.label]["max"] == pytest.approx(1.2)
    assert NO_WINNER in rec["verdict"] and "straddles 1.0" in rec["verdict"]
    assert res["best"]["label"] == DEFAULTS.label  # the defaults stay
    md = markdown(res, "t")
    assert "keep Horovod's defaults" in md and NO_WINNER in md


def test_refuses_with_one_round_and_when_everything_is_slower() -> None:
    one = recommend({"d": [100.0], "x": [150.0]}, "d")
    assert one["recommended"] is None and NO_WINNER in one["verdict"]
    slower = recommend({"d": [100.0, 100.0], "x": [90.0, 95.0]}, "d")
    assert slower["recommended"] is None and "slower in every round" in slower["verdict"]
    assert recommend({"x": [1.0, 2.0]}, "d")["recommended"] is None  # no reference measured


def test_paired_ratios_skip_failed_rounds() -> None:
    assert paired_ratios([110.0, None, 90.0], [100.0, 100.0, 0.0]) == [pytest.approx(1.1)]
