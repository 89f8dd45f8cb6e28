"""bench/check_benchmarks.py fails when a figure in BENCHMARKS.md no longer matches its raw file:
checked on a copy of the text with one number changed, and with one generated line changed."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MD = ROOT / "bench" / "BENCHMARKS.md"
RESULTS = ROOT / "bench" / "results"


def _checker():
    spec = importlib.util.spec_from_file_location("check_benchmarks",
                                                  ROOT / "bench" / "check_benchmarks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _tampered(tmp_path: Path, old: str, new: str) -> Path:
    text = MD.read_text()
    assert text.count(old) == 1, old
    out = tmp_path / "BENCHMARKS.md"
    out.write_text(text.replace(old, new))
    return out


def test_the_shipped_text_matches_its_raw_files() -> None:
    n, bad = _checker().check_figures(MD.read_text(), ROOT / "bench" / "results")
    assert n > 50 and bad == []


def _overhead_row() -> tuple[str, str]:
    """Issue 3's harness-overhead row as the text prints it, and its minimal-loop figure."""
    row = _checker().issue3_overhead(json.loads((RESULTS / "overhead_issue24.json").read_text()))
    return row[0], row[0].split(" | ")[1]


def test_a_changed_headline_figure_fails(tmp_path: Path) -> None:
    # Issue 3's harness overhead, the minimal loop's last digit changed.
    row, minimal = _overhead_row()
    changed = minimal[:-1] + str((int(minimal[-1]) + 1) % 10)
    md = _tampered(tmp_path, f"| {minimal} |", f"| {changed} |")
    _, bad = _checker().check_figures(md.read_text(), RESULTS)
    assert len(bad) == 1 and "issue 3 harness overhead" in bad[0] and row in bad[0]


def test_a_raw_file_that_changed_fails(tmp_path: Path) -> None:
    # The text stays; the raw result says something else now.
    results = tmp_path / "results"
    shutil.copytree(ROOT / "bench" / "results", results)
    raw = results / "overhead_issue24.json"
    raw.write_text(re.sub(r'"overhead_pct": [\d.]+', '"overhead_pct": 7.04', raw.read_text()))
    _, bad = _checker().check_figures(MD.read_text(), results)
    assert len(bad) == 1 and "| +7.0 % |" in bad[0]


def test_a_changed_generated_line_fails(tmp_path: Path) -> None:
    # Only the fusion block, one ratio changed: the re-render differs on that line.
    text = MD.read_text()
    block = re.search(r"<!-- generated: python bench/bench_fusion\.py .*?<!-- end generated -->",
                      text, re.S).group(0)
    check = _checker()
    assert check.check_generated(block) == (1, [])
    # The block's first paired ratio (whatever the last run measured), its first digit bumped.
    ratio = re.search(r"x(\d)\.\d{3} \(", block)
    assert ratio is not None, "the fusion block shows no paired ratio"
    bumped = f"x{int(ratio.group(1)) + 1}" + ratio.group(0)[2:]
    n, bad = check.check_generated(block.replace(ratio.group(0), bumped, 1))
    assert n == 1 and len(bad) == 1 and "differs from the render" in bad[0]


def test_main_exits_non_zero_on_a_mismatch(tmp_path: Path, capsys) -> None:
    row, minimal = _overhead_row()
    md = _tampered(tmp_path, row, row.replace(f"| {minimal} |", "| 1.00 |"))
    text = md.read_text()
    # Keep only the hand-written figures (generated blocks are tested above).
    md.write_text(re.sub(r"<!-- generated: .*?<!-- end generated -->", "", text, flags=re.S))
    assert _checker().main(["--md", str(md)]) == 1
    assert "MISMATCH issue 3 harness overhead" in capsys.readouterr().out


def _emit():
    spec = importlib.util.spec_from_file_location("emit", ROOT / "bench" / "emit.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def test_emit_finds_every_recorded_one_minute_load() -> None:
    result = {"loadavg_start": [1.0, 5.0, 9.0], "quiet_load": 2.5, "workload": 7.0,
              "rounds": [{"head": {"load_before": 1.5, "load_after": 2.0}},
                         {"runs": [{"loadavg_before": [2.2, 0.1, 0.1]}]}],
              "measurement_loadavg": {"start": [2.4, 3, 3], "end": [2.3, 3, 3]}}
    # The 5- and 15-minute figures, the threshold and unrelated keys are not 1-minute loads.
    assert sorted(_emit().recorded_loads(result)) == [1.0, 1.5, 2.0, 2.2, 2.3, 2.4]


def test_emit_labels_a_run_above_the_threshold_not_quiet() -> None:
    out = _emit().label_load({"runs": [{"loadavg_before": [1.0, 1, 1]},
                                       {"loadavg_after": [2.6, 1, 1]}]})
    assert out["quiet"] is False and out["load_1min_max"] >= 2.6
    assert len(out["loadavg_emit"]) == 3  # the load when the result was written
