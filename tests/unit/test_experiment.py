"""One notion of "the same experiment": report grouping, series labels, sweep skipping, failed
points and the record key all follow hvdscale.records.experiment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hvdscale.records.failed import FailedRecord
from hvdscale.records.run import RunRecord
from hvdscale.records.store import append_record
from hvdscale.study.report.points import collect
from hvdscale.study.report.report import open_failures, write_report
from hvdscale.study.sweep.plan import SweepRequest, plan_sweep, recorded
from tests.records_fixture import failed_record, run_record

ROOT = Path(__file__).resolve().parents[2]


def _rec(ranks: int, wps: float, *sets: str, status: str = "ok") -> RunRecord | FailedRecord:
    """A record as the runner (or, failed, the sweep) writes it, for the config ``sets``."""
    if status == "ok":
        rec = run_record(*sets, ranks=ranks, words_per_s=wps, step_time={"jitter": 0.001})
        dedicated = "strategy.ps.placement=dedicated" in sets
        assert rec.workers == ranks - (rec.config.strategy.ps.num_servers
                                       if dedicated else 0)
        return rec
    return failed_record(*sets, ranks=ranks, error="exit 1: boom")


def _table_rows(md: str, heading: str) -> list[str]:
    """The data rows of the first table under the first heading containing ``heading``."""
    lines = md.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("#") and heading in ln)
    rows = []
    for ln in lines[start + 1:]:
        if ln.startswith("#"):
            break
        if ln.startswith("|") and not ln.startswith(("|Ranks|", "|:--", "|Framework|")):
            rows.append(ln)
    return rows


def test_runs_of_different_batch_sizes_never_merge(tmp_path: Path) -> None:
    # The case: two experiments that differ only in data.batch_size, one directory.
    for rec in [_rec(1, 100.0, "data.batch_size=32"), _rec(2, 190.0, "data.batch_size=32"),
                _rec(1, 40.0, "data.batch_size=8"), _rec(2, 60.0, "data.batch_size=8")]:
        append_record(tmp_path, rec)
    md = write_report(tmp_path)
    assert "2 different experiments" in md
    # One section per experiment (the "Why not better" section after them is per config too).
    sections = [ln for ln in md.splitlines() if ln.startswith("## ") and "[experiment " in ln]
    assert len(sections) == 2, md
    assert md.count("Differs from the other experiments in this report in: "
                    "`data.batch_size=32`") == 1
    assert md.count("`data.batch_size=8`") == 1
    # Each experiment's 2-rank row is its own run (Runs=1), with its own baseline's speedup.
    rows = [ln for ln in md.splitlines() if ln.startswith("|2|2|")]
    assert len(rows) == 2, md
    assert {r.split("|")[6] for r in rows} == {"190.0", "60.0"}
    assert {r.split("|")[7] for r in rows} == {"1.90", "1.50"}  # one run: no spread columns
    assert all(r.split("|")[10] == "1" for r in rows)
    assert len((tmp_path / "report.csv").read_text().splitlines()) == 1 + 4


def test_labels_do_not_split_an_experiment() -> None:
    # name, supervision limits and where a timeline goes change no measurement.
    recs = [_rec(1, 100.0), _rec(1, 110.0, "name=other", "measure.step_timeout_s=30",
                                 "measure.run_timeout_s=0", "strategy.horovod.stall_check_s=5")]
    (exp,) = collect(recs).values()
    (points,) = exp.series.values()
    assert points[0].repeats == 2 and points[0].words_per_s == 105.0
    assert exp.names == ["t", "other"]


def test_strategy_settings_are_distinct_series_never_merged(tmp_path: Path) -> None:
    recs = [_rec(2, 100.0, "strategy.name=ps"),
            _rec(2, 50.0, "strategy.name=ps", "strategy.ps.num_servers=2"),
            _rec(2, 40.0, "strategy.name=ps", "strategy.ps.placement=dedicated"),
            _rec(2, 120.0), _rec(2, 110.0, "strategy.horovod.compression=fp16"),
            _rec(2, 115.0, "strategy.horovod.timeline=/tmp/a.json"),
            _rec(2, 115.0, "strategy.horovod.timeline=/tmp/b.json")]
    (exp,) = collect(recs).values()
    labels = sorted(exp.series)
    assert labels == ["torch / fused / horovod", "torch / fused / horovod (compression=fp16)",
                      "torch / fused / horovod (timeline=on)", "torch / fused / ps",
                      "torch / fused / ps x2", "torch / fused / ps-dedicated"]
    assert exp.series["torch / fused / horovod (timeline=on)"][0].repeats == 2
    assert all(p.repeats == 1 for label, pts in exp.series.items() for p in pts
               if "timeline" not in label)


def test_side_by_side_framework_strategy_rnn_impl(tmp_path: Path) -> None:
    for fw in ("torch", "tf"):
        for impl in ("fused", "loop"):
            for s, scale in (("horovod", 1.8), ("independent", 2.0)):
                for n in (1, 2):
                    append_record(tmp_path, _rec(n, 100.0 * (scale if n == 2 else 1.0),
                                                 f"framework={fw}", f"model.rnn_impl={impl}",
                                                 f"strategy.name={s}"))
    md = write_report(tmp_path)
    assert "different experiments" not in md  # framework, impl, strategy are series
    rows = _table_rows(md, "Side by side: framework x strategy x RNN implementation")
    head = [ln for ln in md.splitlines() if ln.startswith("|Framework|Strategy|RNN impl|")]
    # No "speedup N=1" column: 1 worker's speedup is 1 by definition, an empty column.
    assert head == ["|Framework|Strategy|RNN impl|words/s N=1|words/s N=2|"
                    "speedup N=2|vs independent|"]
    assert len(rows) == 8
    assert "|tf|horovod|loop|100.0|180.0|1.80|0.900 at N=2|" in rows
    assert "|torch|independent|fused|100.0|200.0|2.00||" in rows


def test_sweep_skips_by_identity_not_by_raw_config(tmp_path: Path) -> None:
    cfg = ROOT / "configs" / "demo.yaml"
    point = plan_sweep(SweepRequest(cfg, "1", "horovod", out=tmp_path), check_out=False).points[0]
    rec = run_record(cfg=point.cfg, ranks=1, words_per_s=1.0)
    relabeled = plan_sweep(SweepRequest(cfg, "1", "horovod", out=tmp_path,
                                        overrides=["name=renamed", "measure.step_timeout_s=60"]),
                           check_out=False).points[0]
    assert recorded([rec], relabeled) is rec  # a label is not a new measurement
    other = plan_sweep(SweepRequest(cfg, "1", "horovod", out=tmp_path,
                                    overrides=["data.batch_size=3"]), check_out=False).points[0]
    assert recorded([rec], other) is None


def test_failed_point_and_later_success_share_the_identity() -> None:
    failed = _rec(2, 0.0, "strategy.name=ps", status="failed")
    ok = _rec(2, 5.0, "strategy.name=ps", "name=again")
    assert open_failures([failed, ok]) == []
    other_series = _rec(2, 5.0, "strategy.name=ps", "strategy.ps.num_servers=2")
    assert open_failures([failed, other_series]) == [failed]
    assert failed.key["experiment"] == ok.key["experiment"]
    assert failed.key["identity"] == ok.key["identity"]
    assert other_series.key["identity"] != ok.key["identity"]


def test_report_names_a_foreign_record(tmp_path: Path) -> None:
    from hvdscale.errors import HvdscaleError

    append_record(tmp_path, _rec(1, 1.0))
    with open(tmp_path / "results.jsonl", "a") as f:
        f.write(json.dumps({"status": "ok", "words_per_s": 3}) + "\n")
    with pytest.raises(HvdscaleError, match=r"results.jsonl:2: field 'name' of a run record "
                                            r"is missing"):
        write_report(tmp_path)
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 2
    (tmp_path / "results.jsonl").write_text(json.dumps([1, 2]) + "\n")
    with pytest.raises(HvdscaleError, match=r"results.jsonl:1 is not a JSON record \(an object"):
        write_report(tmp_path)
