"""Records their sweep never accounted for are left out by the readers (issue 50): the evidence
run's second loan (bench/results/h100_2026-11-27b) had two points finish after the sweep was cut
by its deadline, each missing from the sweep's own sweep_timing.jsonl, and both were published."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hvdscale.records.fields import Record
from hvdscale.records.run import RunRecord
from hvdscale.records.store import load_records
from hvdscale.study.report.report import write_report
from hvdscale.study.sweep.timing import TIMING_FILE, unaccounted
from tests.records_fixture import run_dict

LOAN2 = Path(__file__).resolve().parents[2] / "bench/results/h100_2026-11-27b/cpu"


def _left_out(folder: Path) -> tuple[list[Record], list[str]]:
    kept, notes = unaccounted(load_records(folder))
    return [r for _, r in kept], notes


def _point(rec: RunRecord) -> tuple[str, int]:
    return rec.strategy_name, rec.workers


def test_loan_two_late_points_are_left_out_with_a_note() -> None:
    kept, notes = _left_out(LOAN2 / "round2/demo")
    # Independent np=2 finished at 12:05:40, after the cut: 7 launches logged, 8 records.
    assert len(kept) == 7 and ("independent", 2) not in map(_point, kept)
    assert len(notes) == 1 and "results.jsonl:8 (np=2, finished 2026-11-27T12:05:40" in notes[0]
    kept, notes = _left_out(LOAN2 / "round1/demo")
    # Round 1 too: DDP np=8 (12:04:00) ran past the deadline that cut the round at 344 s.
    assert len(kept) == 22 and ("ddp", 8) not in map(_point, kept)
    assert ("horovod", 8) in map(_point, kept) and len(notes) == 1


def test_the_report_leaves_the_late_point_out_and_says_so(tmp_path: Path) -> None:
    shutil.copytree(LOAN2 / "round2/demo", tmp_path / "demo")
    md = write_report(tmp_path / "demo")
    assert "## Left out: records their sweep never accounted for" in md
    assert "19804" not in md.replace(",", "") and "19803.5" not in md  # its words/s nowhere
    assert "16329" in md.replace(",", "")  # DDP np=2, logged, stays


def test_a_record_inside_its_launch_is_kept_and_one_without_a_sweep_too(tmp_path: Path) -> None:
    rec = run_dict("name=demo-round1", ranks=2, finished="2026-11-27T12:00:10+00:00")
    at = 1795780810.0  # 12:00:10 UTC
    (tmp_path / "results.jsonl").write_text(json.dumps(rec) + "\n")
    assert len(_left_out(tmp_path)[0]) == 1  # no sweep_timing.jsonl: not a sweep's, kept
    line = {"point": "torch horovod np=2", "round": 0, "at": at + 0.4, "launch_s": 12.0}
    (tmp_path / TIMING_FILE).write_text(json.dumps(line) + "\n")
    assert _left_out(tmp_path)[1] == []
    for wrong in ({"round": 1}, {"point": "torch horovod np=4"}, {"at": at - 20.0}):
        (tmp_path / TIMING_FILE).write_text(json.dumps({**line, **wrong}) + "\n")
        assert len(_left_out(tmp_path)[1]) == 1, wrong
    # A command's own summary beside the launches' records (``hvdscale batch``) is no launch's.
    summary = {"kind": "batch", "status": "ok", "started": "2026-11-27T12:59:00+00:00",
               "finished": "2026-11-27T13:00:00+00:00", "name": "demo", "framework": "torch",
               "config": rec["config"], "strategy": "horovod", "hidden": 128, "threads": 1,
               "points": [], "gemm": {}, "loadavg": {"before": [0.5], "after": [0.5]},
               "versions": {}, "git": None}
    (tmp_path / "results.jsonl").write_text(json.dumps(summary) + "\n")
    kept, notes = _left_out(tmp_path)
    assert [r.kind for r in kept] == ["batch"] and notes == []
