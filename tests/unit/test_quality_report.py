"""The report's time-to-quality section (hvdscale.study.quality.time_to_quality) on ordinary
records: targets missed at one rank, runs with an evaluation curve but no target, runs stopped
before their first evaluation, separate experiments, and the interpolated crossing it and
bench_quality share."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from hvdscale.config import load_config, to_dict
from hvdscale.records.run import RunRecord
from hvdscale.study.quality.time_to_quality import crossing, quality_section, target_loss
from hvdscale.study.quality.time_to_target import round_figures
from hvdscale.train.until import UntilTracker
from tests.records_fixture import run_record

ROOT = Path(__file__).resolve().parents[2]


def _curve(losses: list[float], every: int = 10, s_per_step: float = 0.1) -> list[dict]:
    return [{"step": every * (i + 1), "updates": every * (i + 1) + 2,
             "words": 100 * every * (i + 1), "train_s": s_per_step * every * (i + 1),
             "wall_s": s_per_step * every * (i + 1), "loss": loss}
            for i, loss in enumerate(losses)]


def _record(ranks: int, scaling: str, losses: list[float], words_per_s: float,
            target: float | None = 2.0, batch: int = 32) -> RunRecord:
    """A record as the runner writes it (the parts the report reads)."""
    sets = [f"data.scaling={scaling}", f"data.batch_size={batch}", "measure.eval_every=10"]
    if target is not None:
        sets += ["measure.until.metric=loss", f"measure.until.target={target}"]
    cfg = to_dict(load_config(None, sets))
    curve = _curve(losses)
    hit = next((p for p in curve if target is not None and p["loss"] <= target), None)
    until = cfg["measure"]["until"] if target is not None else None
    return run_record(*sets, ranks=ranks, workers=ranks, words_per_s=words_per_s,
                      quality={"until": until, "curve": curve, "floor_loss": None,
                               "reached": hit is not None if until else None,
                               "time_to_target_s": hit["train_s"] if hit else None,
                               "train_s": curve[-1]["train_s"] if curve else None,
                               "steps": curve[-1]["step"] if curve else 0})


def test_crossing_interpolates_between_the_evaluations_either_side() -> None:
    curve = _curve([3.0, 2.5, 1.5])  # 2.0 is met half-way from step 20 to step 30
    hit = crossing(curve, 2.0)
    assert hit is not None
    assert math.isclose(hit["step"], 25.0) and math.isclose(hit["train_s"], 2.5)
    assert math.isclose(hit["words"], 2500.0) and math.isclose(hit["updates"], 27.0)
    assert crossing(curve, 1.0) is None
    assert crossing(curve, 3.0)["step"] == 10  # met at the first evaluation: that point


def test_a_diverged_evaluation_never_meets_the_target() -> None:
    # NaN <= target is False, and so is NaN > target: only the first is a safe test.
    assert crossing(_curve([3.0, math.nan, math.nan]), 2.0) is None
    one = _record(1, "weak", [3.0, 1.5], 1000.0)
    two = _record(2, "weak", [3.0, math.nan], 1900.0)  # diverged: the run says not reached
    assert two.quality["reached"] is False
    assert "not reached" in quality_section([one, two]).split("| 2 |")[-1]


def test_a_run_that_reports_reached_false_gets_no_crossing() -> None:
    # The curve crosses 2.0 at step 20, but the run's own verdict (reached: false, e.g. a
    # finite evaluation between diverged ones, or a target met only after the cap) stands.
    one = _record(1, "weak", [3.0, 1.5], 1000.0)
    two = _record(2, "weak", [3.0, 1.5], 1900.0)
    assert crossing(two.quality["curve"], 2.0) is not None
    two.quality["reached"], two.quality["time_to_target_s"] = False, None
    row = next(line for line in quality_section([one, two]).splitlines()
               if line.startswith("| 2 |"))
    assert "not reached (2 s cap)" in row and "target not reached" in row, row


def test_until_never_meets_a_target_with_a_nan_loss() -> None:
    # A diverged evaluation (NaN) meets no target of any metric; a finite one below it does.
    for metric, target in (("loss", 2.0), ("perplexity", 8.0), ("floor_fraction", 0.5)):
        measure = load_config(None, ["measure.eval_every=10", f"measure.until.metric={metric}",
                                     f"measure.until.target={target}"]).measure
        tracker = UntilTracker(measure, evaluator=None, floor_loss=1.0,  # type: ignore[arg-type]
                               corpus_sentences=100)
        assert not tracker.meets(math.nan), metric
        assert tracker.meets(0.5), metric


def test_target_loss_of_each_metric() -> None:
    assert target_loss({"metric": "loss", "target": 2.0}, None) == 2.0
    assert math.isclose(target_loss({"metric": "perplexity", "target": math.e}, None), 1.0)
    assert math.isclose(target_loss({"metric": "floor_fraction", "target": 0.5}, 1.0),
                        1.0 + math.log(1.5))


def test_one_rank_missing_the_target_does_not_crash_the_report() -> None:
    one = _record(1, "weak", [3.0, 2.8, 2.6], 1000.0)  # never <= 2.0
    two = _record(2, "weak", [3.0, 1.0], 1900.0)
    md = quality_section([one, two])
    assert "1-rank target not reached" in md
    assert "not reached (3 s cap)" in md  # the 1-rank cell: its training time


def test_a_run_stopped_before_its_first_evaluation_renders() -> None:
    one = _record(1, "weak", [3.0, 1.0], 1000.0)
    two = _record(2, "weak", [], 1900.0)  # no evaluation: train_s is None
    md = quality_section([one, two])
    assert "not reached (0 s cap)" in md and "target not reached" in md


def test_records_without_a_target_get_no_quality_section() -> None:
    evals_only = [_record(1, "weak", [3.0, 2.0], 1000.0, target=None),
                  _record(2, "weak", [3.0, 2.0], 1900.0, target=None)]
    assert quality_section(evals_only) == ""
    md = quality_section([*evals_only, _record(1, "weak", [3.0, 1.0], 1000.0)])
    assert "None <= None" not in md and "loss <= 2.0" in md


def test_time_to_target_is_interpolated_and_the_stop_kept() -> None:
    one = _record(1, "weak", [3.0, 2.0], 1000.0)   # exactly at step 20: 2.0 s
    two = _record(2, "weak", [2.2, 1.8], 2000.0)   # crossed half-way: 1.5 s, stopped 2.0 s
    md = quality_section([one, two])
    row = next(line for line in md.splitlines() if line.startswith("| 2 |"))
    # speedup 2.0 / 1.5 = 1.33 (1.00 at the stop), throughput 2.00, efficiency 0.67
    assert "| 1.5 (stop 2.0) | 1.33 | 2.00 | 0.67 |" in row
    assert "steps to target x0.77, words to target x0.75" in row  # (15+2)/(20+2)


def test_different_experiments_are_never_compared() -> None:
    one = _record(1, "weak", [3.0, 1.0], 1000.0, batch=32)
    other = _record(2, "weak", [3.0, 1.0], 1900.0, batch=64)  # another batch: no base
    md = quality_section([one, other])
    assert md.count("\n### ") == 2
    strong = _record(2, "strong", [3.0, 1.0], 1800.0, batch=32)  # same experiment, strong
    md = quality_section([one, strong])
    assert md.count("\n### ") == 1
    row = next(line for line in md.splitlines() if line.startswith("| 2 |"))
    assert "| 16 | 32 |" in row and "1.80" in row


def test_the_bench_uses_the_same_interpolation() -> None:
    spec = importlib.util.spec_from_file_location("bench_quality",
                                                  ROOT / "bench" / "bench_quality.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    one = {"curve": _curve([3.0, 2.0]), "target": 2.0, "words_per_s": 1000.0}
    two = {"curve": _curve([2.2, 1.8]), "target": 2.0, "words_per_s": 2000.0}
    assert bench.round_figures is round_figures  # the bench's figures are the package's
    st = round_figures(one, two)
    assert st["ttt1"] == pytest.approx(2.0) and st["ttt2"] == pytest.approx(1.5)
    assert st["stop2"] == pytest.approx(2.0) and st["eff"] == pytest.approx(2 / 3)
