"""tools/checks/check_benchmarks.py fails when a figure in BENCHMARKS.md no longer matches its raw
file: checked on a copy of the text with one number changed, with figures swapped between runs
or rows, with one generated line changed; and bench/emit.py labels the load as the rule says."""

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
                                                  ROOT / "tools" / "checks" /
                                                  "check_benchmarks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _sections():
    """check_sections (the development machine's sections), as check_benchmarks imports it."""
    _checker()  # puts tools/checks/ and bench/ (emit) on the path
    import check_sections

    return check_sections


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
    name = "overhead_issue24.json"
    row = _sections().issue3_overhead_row(name, json.loads((RESULTS / name).read_text()))
    return row, row.split(" | ")[2]


def test_a_changed_headline_figure_fails(tmp_path: Path) -> None:
    # Issue 3's harness overhead, the minimal loop's last digit changed.
    row, minimal = _overhead_row()
    changed = minimal[:-1] + str((int(minimal[-1]) + 1) % 10)
    md = _tampered(tmp_path, f"| {minimal} |", f"| {changed} |")
    _, bad = _checker().check_figures(md.read_text(), RESULTS)
    assert len(bad) == 1 and "issue 3 harness overhead" in bad[0] and row in bad[0]


def test_the_back_test_is_recomputed_from_the_commands_own_output(tmp_path: Path) -> None:
    # Issue 21's table is ``hvdscale backtest``'s summary of the JSON its --out wrote: one
    # predicted figure changed in the text is a mismatch of that section, naming the row.
    row = "|seed000_ps_cudnn_lstm|ps|ps|8|360630|369105|+2.4|yes|7|"
    md = _tampered(tmp_path, row, row.replace("369105", "369106"))
    _, bad = _checker().check_figures(md.read_text(), RESULTS)
    assert len(bad) == 1 and "issue 21 back-test" in bad[0] and row in bad[0]


def test_a_raw_file_that_changed_fails(tmp_path: Path) -> None:
    # The text stays; the raw result says something else now.
    results = tmp_path / "results"
    shutil.copytree(ROOT / "bench" / "results", results)
    raw = results / "overhead_issue24.json"
    raw.write_text(re.sub(r'"overhead_pct": [\d.]+', '"overhead_pct": 7.04', raw.read_text()))
    _, bad = _checker().check_figures(MD.read_text(), results)
    assert len(bad) == 1 and "| +7.0 % |" in bad[0]


def test_swapped_run_columns_fail(tmp_path: Path) -> None:
    # Issue 17's table: the run-1 and run-2 columns swapped in every row (the labels stay).
    text = MD.read_text()
    head = "| (median step, ms) | run 1 (`overhead_issue17_run1.json`)"
    rows = []
    for line in text[text.index(head):].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    swapped = text
    for row in rows:
        label, r1, r2 = row.strip("|").split(" | ")
        swapped = swapped.replace(row, f"|{label} | {r2.strip()} | {r1.strip()} |")
    assert swapped != text and len(rows) == 7
    _, bad = _checker().check_figures(swapped, RESULTS)
    assert len(bad) == 7 and all("issue 17" in b for b in bad)


def _swap_rows(text: str, label_a: str, label_b: str) -> str:
    """The text with the figures of the table rows labelled ``label_a`` and ``label_b`` swapped,
    each row keeping its own label."""
    lines = text.splitlines(keepends=True)
    a, b = (next(i for i, x in enumerate(lines) if x.startswith(f"| {lab} | "))
            for lab in (label_a, label_b))
    fa, fb = (lines[i].split(" | ", 1)[1] for i in (a, b))
    assert fa != fb
    lines[a], lines[b] = f"| {label_a} | {fb}", f"| {label_b} | {fa}"
    return "".join(lines)


def test_figures_moved_to_another_row_fail() -> None:
    text = MD.read_text()
    # Issue 16's timed table: the np=2 fused and np=2 loop rows' figures swapped.
    _, bad = _checker().check_figures(_swap_rows(text, "np=2, fused", "np=2, loop"), RESULTS)
    assert len(bad) == 2 and all("issue 16 timed" in b for b in bad)
    # Issue 3's harness-overhead table: the first two runs' figures swapped.
    swapped = _swap_rows(text, "`overhead_issue24.json`", "`overhead_issue24_run2.json`")
    _, bad = _checker().check_figures(swapped, RESULTS)
    assert len(bad) == 2 and all("issue 3 harness overhead" in b for b in bad)
    # Issue 10: the embedding ratio moved to the row above it (its value tied to its label).
    swapped = _swap_rows(text, "tf embedding gradients gathered / dense, np=2",
                         "torch horovod / torch independent, np=2")
    _, bad = _checker().check_figures(swapped, RESULTS)
    assert len(bad) == 2 and all("issue 10 frameworks" in b for b in bad)


def test_the_quiet_label_is_recomputed_from_the_recorded_loads(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    raw = results / "overhead_issue24.json"
    d = json.loads(raw.read_text())
    # The stored summary lies: the check does not read it.
    raw.write_text(json.dumps({**d, "quiet": False, "load_1min_max": 9.99}))
    assert _checker().check_figures(MD.read_text(), results)[1] == []
    # A recorded reading above 2.5: the row's max load and quiet label no longer match.
    raw.write_text(json.dumps({**d, "loadavg_before": [3.0, 1.0, 1.0]}))
    _, bad = _checker().check_figures(MD.read_text(), results)
    assert len(bad) == 1 and "| 3.00 | no |" in bad[0]


def test_calling_a_run_quiet_from_one_reading_at_the_end_fails(tmp_path: Path) -> None:
    # The shipped text calls strategies_np2 quiet from its per-launch loads. The same raw file
    # with only one reading, taken at the end (as the bench first wrote it), may not be called
    # quiet, however low that reading.
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    raw = results / "strategies_np2.json"
    d = json.loads(raw.read_text())
    for launch in d["launches"]:  # the launches' words/s stay: the table is computed from them
        del launch["load_before"], launch["load_after"]
    for k in [k for k in d if "load" in k or k.startswith("quiet")]:
        del d[k]
    d["loadavg_emit"] = [1.5, 2.85, 2.98]
    raw.write_text(json.dumps(d))
    _, bad = _checker().check_figures(MD.read_text(), results)
    assert len(bad) == 1 and "issue 3 scaling" in bad[0], bad
    assert "one reading, at the end: 1-minute load 1.50; not quiet" in bad[0]


def test_a_threshold_stored_in_the_raw_file_is_not_trusted(tmp_path: Path) -> None:
    # The text calls run2 (a 1-minute load of 3.14) not quiet. A raw file that raises its own
    # threshold cannot make that load quiet: the check judges by the project's QUIET_LOAD.
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    raw = results / "overhead_issue24_run2.json"
    raw.write_text(json.dumps({**json.loads(raw.read_text()), "quiet_load": 9.0}))
    assert _checker().check_figures(MD.read_text(), results)[1] == []
    # And read back directly: a 3.0 load is not quiet, whatever threshold the file names.
    q = _emit().quiet_label({"loadavg_before": [3.0, 1.0, 1.0], "quiet_load": 9.0})
    assert q["quiet"] is False and q["quiet_load"] == _emit().QUIET_LOAD
    # The same for a generated block: the TF overhead table renders from its raw file alone.
    spec = importlib.util.spec_from_file_location("bench_overhead_tf",
                                                  ROOT / "bench" / "bench_overhead_tf.py")
    tf_bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tf_bench)  # type: ignore[union-attr]
    d = json.loads((RESULTS / "overhead_tf_issue24.json").read_text())
    d["block_load_1min"][0] = [3.0, 3.0]
    assert "| 1-minute load, every block | not quiet | " in tf_bench.render(
        {**d, "quiet_load": 9.0})


def _strategies(tmp_path: Path, change) -> list[str]:
    """The check's mismatches with strategies_np2.json changed by ``change`` (in place)."""
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    raw = results / "strategies_np2.json"
    d = json.loads(raw.read_text())
    change(d)
    raw.write_text(json.dumps(d))
    return _checker().check_figures(MD.read_text(), results)[1]


def test_the_strategies_table_is_recomputed_from_the_launches(tmp_path: Path) -> None:
    # Stored medians and ratios that lie change nothing: the launches give the table.
    def lie(d: dict) -> None:
        d["median_words_per_s"] = {k: v * 1.1 for k, v in d["median_words_per_s"].items()}
        d["all_words_per_s"] = {k: [x * 1.1 for x in v] for k, v in d["all_words_per_s"].items()}
        for k in ("horovod_over_independent", "ps_over_independent", "ps_over_horovod"):
            d[k] = 0.99
    assert _strategies(tmp_path / "lie", lie) == []

    # A changed launch moves horovod's median (24948 to 25824, the next launch up): its row
    # with its ratio no longer matches the text (ps / horovod of one run is withdrawn, issue 62).
    def faster(d: dict) -> None:
        launch = next(x for x in d["launches"] if round(x["words_per_s"]) == 24948)
        launch["words_per_s"] = 26000.0
    bad = _strategies(tmp_path / "faster", faster)
    assert len(bad) == 1 and all("issue 3 scaling" in b for b in bad), bad
    assert "| horovod | 25824 | 65.7 | **0.929** |" in bad[0]
    # A strategy short of launches has no median to compare: one clear line, not a guess.
    bad = _strategies(tmp_path / "short", lambda d: d["launches"].pop())
    assert len(bad) == 1 and "launches per strategy differ" in bad[0], bad


def test_gemm_findings_that_match_nothing_fail(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    gemm = results / "gemm.md"
    gemm.write_text(gemm.read_text().replace("/13 batch sizes", " of 13 batch sizes"))
    _, bad = _checker().check_figures(MD.read_text(), results)
    assert len(bad) == 1 and "issue 15 GEMM findings: nothing to check" in bad[0]


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


def _label(monkeypatch, result: dict, now: float = 0.5) -> dict:
    """emit.label_load with the load at emit time fixed (the machine's own is not read)."""
    emit = _emit()
    monkeypatch.setattr(emit.os, "getloadavg", lambda: (now, now, now))
    return emit.label_load(result)


def test_emit_labels_a_run_above_the_threshold_not_quiet(monkeypatch) -> None:
    out = _label(monkeypatch, {"runs": [{"loadavg_before": [1.0, 1, 1]},
                                        {"loadavg_after": [2.6, 1, 1]}]})
    assert out["quiet"] is False and out["load_1min_max"] == 2.6
    assert out["loadavg_emit"] == [0.5, 0.5, 0.5]  # the load when the result was written


def test_emit_labels_a_run_below_the_threshold_quiet(monkeypatch) -> None:
    out = _label(monkeypatch, {"runs": [{"loadavg_before": [1.0, 9, 9]},
                                        {"load_after": [2.4, 9, 9]}]})
    assert out["quiet"] is True and out["load_1min_max"] == 2.4


def test_emit_does_not_call_a_run_quiet_from_one_reading_at_the_end(monkeypatch) -> None:
    out = _label(monkeypatch, {"median_words_per_s": 1.0}, now=1.0)
    assert out["quiet"] is False and out["load_1min_max"] == 1.0
    assert "one reading at the end" in out["quiet_basis"]
    # Read back from a raw file, the same: the stored label is not what decides.
    assert _emit().quiet_label({**out, "quiet": True})["quiet"] is False


def test_emit_reads_triples_only_under_a_load_average_key() -> None:
    loads = _emit().recorded_loads
    # Three per-round 1-minute loads are three loads, not a [1, 5, 15] triple.
    assert loads({"round_load_1min": [1.0, 2.6, 1.5]}) == [1.0, 2.6, 1.5]
    assert loads({"loadavg_before": [1.0, 2.6, 1.5]}) == [1.0]
    assert loads({"load_before": [1.0, 2.6, 1.5]}) == [1.0]  # bench_ddp's os.getloadavg()
    assert loads({"load_max": 9.0, "max_load": 9.0, "quiet_load": 2.5}) == []  # summaries
