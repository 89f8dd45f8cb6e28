"""The back-test on the shipped seed tables: every table and held-out n, predictions from
n <= 4 only, and one clear error for a bad table."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hvdscale.cli import main
from hvdscale.errors import HvdscaleError
from hvdscale.study.predict.backtest import render, run_backtest
from hvdscale.study.predict.tables import TABLES_DIR, load_tables, read_table


def test_ten_tables_with_their_numbers() -> None:
    tables = {t.name: t for t in load_tables()}
    assert len(tables) == 10
    assert tables["seed000_independent_dynamic_rnn"].gpus == list(range(1, 8))
    nccl = tables["seed000_nccl_allreduce_dynamic_rnn"]
    assert nccl.words_per_s[-1] == 210048.363 and nccl.step_s[-1] == pytest.approx(58.793 / 20)
    assert tables["seed001_ps_cudnn_lstm"].words_per_s[0] == 50007.279


def test_one_entry_per_table_and_held_out_n() -> None:
    res = run_backtest()
    assert len(res["tables"]) == 10 and len(res["entries"]) == 9 * 4 + 3
    for p in res["tables"]:
        assert p["fit_n"] == [1, 2, 3, 4]
        assert [r["n"] for r in p["predictions"]] == list(range(5, p["largest_n"] + 1))
        for r in p["predictions"]:
            assert r["error_pct"] == pytest.approx(
                100 * (r["predicted_words_per_s"] / r["measured_words_per_s"] - 1))
    worst = max(abs(p["error_at_largest_pct"]) for p in res["tables"])
    assert abs(res["overall"]["worst_error_at_largest_pct"]) == worst


def test_predictions_never_see_the_held_out_rows(tmp_path: Path) -> None:
    for f in TABLES_DIR.glob("*.csv"):
        shutil.copy(f, tmp_path)
    name = "seed000_nccl_allreduce_dynamic_rnn"
    path = tmp_path / f"{name}.csv"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(  # n >= 5 twice as fast: the fit on n <= 4 must not move
        ln if not ln[:1].isdigit() or int(ln.split(",")[0]) <= 4 else
        ",".join([*ln.split(",")[:2], str(float(ln.split(",")[2]) / 2),
                  str(2 * float(ln.split(",")[3])), ""]) for ln in lines) + "\n")
    a, b = (next(p for p in run_backtest(d)["tables"] if p["table"] == name)
            for d in (None, tmp_path))
    assert [r["predicted_words_per_s"] for r in a["predictions"]] == \
        [r["predicted_words_per_s"] for r in b["predictions"]]
    assert b["predictions"][-1]["measured_words_per_s"] == \
        2 * a["predictions"][-1]["measured_words_per_s"]
    assert b["measured"][-1][1] == 2 * a["measured"][-1][1]  # what the plot draws


def test_a_table_with_a_missing_n_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture
                                             ) -> None:
    src = TABLES_DIR / "seed001_ps_dynamic_rnn.csv"
    bad = tmp_path / "gap.csv"
    bad.write_text("\n".join(ln for ln in src.read_text().splitlines()
                             if not ln.startswith("3,")) + "\n")
    with pytest.raises(HvdscaleError, match="missing: 3"):
        read_table(bad)
    assert main(["backtest", "--tables", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "missing: 3" in err and "Traceback" not in err


def test_cli_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "bt.json"
    assert main(["backtest", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert {e["table"] for e in data["entries"]} == {t.name for t in load_tables()}
    assert "Worst at the largest n" in capsys.readouterr().out


def test_interval_coverage_is_counted_and_printed() -> None:
    res = run_backtest()
    inside = [e for e in res["entries"] if e["inside_interval"]]
    for e in inside:
        lo, hi = e["interval_words_per_s"]
        assert lo <= e["measured_words_per_s"] <= (hi or float("inf"))
    # a t-based prediction interval: 22 of 39 (the normal interval of the mean held 15)
    assert res["overall"]["interval_coverage"] == len(inside) == 22
    assert "The 95 % prediction interval holds 22 of the 39 held-out" in render(res)


def test_misses_name_the_chosen_family_only() -> None:
    text = render(run_backtest())
    assert "No family fits" not in text
    assert "The chosen family misses by more than 10 % at n = 8" in text


@pytest.mark.parametrize("fit_max", ["7", "8", "20"])
def test_fit_max_leaving_nothing_to_predict_is_refused(capsys: pytest.CaptureFixture,
                                                       fit_max: str) -> None:
    assert main(["backtest", "--fit-max", fit_max]) == 2
    err = capsys.readouterr().err
    assert f"--fit-max {fit_max} leaves nothing to predict" in err and "Traceback" not in err
    assert "seed000_independent_dynamic_rnn (largest n 7)" in err
