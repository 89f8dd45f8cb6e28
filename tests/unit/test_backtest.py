"""The back-test on the shipped seed tables: every table and held-out n, predictions from
n <= 4 only; tables at the GPU counts people publish (powers of two, 1, 4, 8, 16), a note where
too few remain to choose a family, and one clear error for a table it cannot use."""

from __future__ import annotations

import json
import re
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


def _ring_table(directory: Path, gpus: list[int], name: str = "published") -> Path:
    """A table as people publish them: ``gpus`` rows (in the order given) of an NCCL run
    whose step time is exactly t0 + 2(n-1)/n S/B (ring-bandwidth)."""
    directory.mkdir(exist_ok=True)
    rows = []
    for n in gpus:
        t = 0.5 + 0.1 * 2 * (n - 1) / max(n, 1)  # (n = 0: a bad row, any time)
        rows.append(f"{n},384,{20 * t},{n * 10000 / t},")
    path = directory / f"{name}.csv"
    path.write_text(f"# table: {name}\n# source: synthetic\n# strategy: nccl\n# rnn: x\n"
                    "gpus,batch_size,time_20_batches_s,words_per_s,speedup\n"
                    + "\n".join(rows) + "\n")
    return path


def test_a_table_with_a_gap_backtests(tmp_path: Path) -> None:
    src = TABLES_DIR / "seed001_ps_dynamic_rnn.csv"
    (tmp_path / "gap.csv").write_text("\n".join(ln for ln in src.read_text().splitlines()
                                                if not ln.startswith("3,")) + "\n")
    (p,) = run_backtest(tmp_path)["tables"]
    assert p["fit_n"] == [1, 2, 4] and p["family_chosen"] and p["note"] is None
    assert [r["n"] for r in p["predictions"]] == [5, 6, 7, 8]


def test_a_powers_of_two_table_backtests(tmp_path: Path, capsys: pytest.CaptureFixture
                                         ) -> None:
    _ring_table(tmp_path, [1, 2, 4, 8, 16])
    (p,) = run_backtest(tmp_path)["tables"]
    assert p["fit_n"] == [1, 2, 4] and [r["n"] for r in p["predictions"]] == [8, 16]
    # three counts choose the family by held-out error: the one the rows were made from
    assert p["family_chosen"] and p["note"] is None and p["family"] == "ring-bandwidth"
    assert abs(p["error_at_largest_pct"]) < 1e-6
    assert main(["backtest", "--tables", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "|published|nccl|ring-bandwidth|16|" in out and "not chosen" not in out


def test_a_1_4_8_16_table_backtests_in_any_row_order(tmp_path: Path) -> None:
    _ring_table(tmp_path, [16, 1, 8, 4])
    (p,) = run_backtest(tmp_path, fit_max=8)["tables"]
    assert p["fit_n"] == [1, 4, 8] and [r["n"] for r in p["predictions"]] == [16]
    assert p["family_chosen"] and p["family"] == "ring-bandwidth"
    assert [n for n, _ in p["measured"]] == [1, 4, 8, 16]


def test_two_points_say_the_family_cannot_be_chosen(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    _ring_table(tmp_path, [1, 4, 8, 16])
    res = run_backtest(tmp_path)  # n <= 4: only 1 and 4
    (p,) = res["tables"]
    assert p["fit_n"] == [1, 4] and not p["family_chosen"]
    assert "only 2 GPU counts at n <= 4 (1, 4), too few to choose" in p["note"]
    assert "ring, ring-bandwidth, tree, shared-link, sync" in p["note"]
    assert res["overall"]["family_not_chosen"] == ["published"]
    assert [r["n"] for r in p["predictions"]] == [8, 16]  # still predicted, and said so
    assert main(["backtest", "--tables", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "- NOTE: published: only 2 GPU counts" in out
    assert "|published|nccl|ring-bandwidth (not chosen)|16|" in out
    assert "Family not chosen (too few GPU counts to fit on):" in out


def test_fit_max_leaving_only_the_1_gpu_row_is_refused(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    _ring_table(tmp_path, [1, 4, 8, 16])
    assert main(["backtest", "--tables", str(tmp_path), "--fit-max", "3"]) == 2
    err = capsys.readouterr().err
    assert "--fit-max 3 leaves only the 1-GPU row to fit on in published" in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(("gpus", "says"), [
    ([2, 4, 8, 16], "no 1-GPU row (rows: 2, 4, 8, 16)"),
    ([1, 2, 4, 4, 8], "each GPU count needs exactly one row; 4 appear(s) more than once"),
    ([0, 1, 2, 4], "GPU counts must be positive (got 0"),
])
def test_a_table_the_backtest_cannot_use_is_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture, gpus: list[int], says: str) -> None:
    path = _ring_table(tmp_path, gpus)
    with pytest.raises(HvdscaleError, match=re.escape(says)):
        read_table(path)
    assert main(["backtest", "--tables", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err


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
