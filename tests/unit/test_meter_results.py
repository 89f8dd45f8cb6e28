"""Meter arithmetic, atomic records, and the report's speedup and efficiency."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import time
from pathlib import Path

import pytest

from hvdscale.core.meter import StepMeter, spread, summarize
from hvdscale.errors import HvdscaleError
from hvdscale.records.kinds import typed
from hvdscale.records.run import RunRecord
from hvdscale.records.store import (
    append_record,
    check_writable,
    read_records,
    results_path,
)
from hvdscale.study.report.points import collect
from hvdscale.study.report.report import write_report
from tests.records_fixture import run_dict, run_record

_BASE = run_dict()


def test_spread_median_mad_and_interval() -> None:
    s = spread([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s["median"] == 3.0
    assert s["jitter"] == pytest.approx(1.4826 * 1.0)
    assert s["ci95"] > 0 and s["n"] == 5


def test_warmup_excluded_and_words_summed_over_ranks() -> None:
    ranks = []
    for r in range(2):
        m = StepMeter(warmup_steps=2)
        for step in range(-2, 3):
            m.start_step()
            m.end_step(step, words=100 + r, loss_tokens=50, padded=150, sentences=4, loss_sum=5.0)
        m.window_start, m.window_end = 0.0, 2.0 + r  # rank 1's window is the longer one
        ranks.append(dict(m.rank_summary(), rank=r))
    assert len(ranks[0]["warmup_times"]) == 2 and len(ranks[0]["step_times"]) == 3
    s = summarize(ranks, [0, 1])
    assert s["words"] == 3 * 100 + 3 * 101
    assert s["words_per_s"] == pytest.approx(603 / 3.0)  # longest window, never rank 0 x N
    assert s["padded_fraction"] == pytest.approx(1 - 603 / 900)


def test_cpu_busy_is_the_cores_each_computing_rank_kept_busy(tmp_path: Path) -> None:
    m = StepMeter(warmup_steps=0)
    m.open_window()
    spin = 0
    while m.cpu_start + 0.05 > time.process_time():  # 50 ms of this thread's CPU
        spin += 1
    m.close_window()
    assert m.rank_summary()["cpu_s"] >= 0.05
    ranks = [{**m.rank_summary(), "rank": 0, "cpu_s": 1.0, "window_s": 2.0},
             {**m.rank_summary(), "rank": 1, "cpu_s": 3.0, "window_s": 2.0},
             {**m.rank_summary(), "rank": 2, "cpu_s": 9.0, "window_s": 2.0}]  # a server
    assert summarize(ranks, [0, 1])["cpu_busy"] == pytest.approx((0.5 + 1.5) / 2)
    append_record(tmp_path, run_record(cpu_busy=0.75))
    write_report(tmp_path, tmp_path / "report")
    assert "|CPU busy (cores per rank)|" in (tmp_path / "report" / "report.md").read_text()
    assert "|0.75|" in (tmp_path / "report" / "report.md").read_text()


def _named(name: str, pad: int = 0) -> RunRecord:
    """A run record told apart by its name (``pad``: that many characters more, in its argv)."""
    rec = typed({**_BASE, "name": name, "argv": ["x" * pad]})
    assert isinstance(rec, RunRecord)
    return rec


def _append_many(d: str, worker: int) -> None:
    for i in range(20):
        append_record(d, _named(f"w{worker}-{i}", pad=5000))


def test_concurrent_appends_never_interleave_or_lose(tmp_path: Path) -> None:
    append_record(tmp_path, _named("first"))
    procs = [mp.get_context("fork").Process(target=_append_many, args=(str(tmp_path), w))
             for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    lines = results_path(tmp_path).read_text().splitlines()
    assert len(lines) == 61
    recs = [json.loads(ln) for ln in lines]
    assert recs[0] == _named("first").to_dict()
    assert sorted(tuple(map(int, r["name"][1:].split("-"))) for r in recs[1:]) == [
        (w, i) for w in range(3) for i in range(20)]
    assert all(r["argv"] == ["x" * 5000] for r in recs[1:])
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


def test_unwritable_results_dir_is_detected(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    with pytest.raises(HvdscaleError, match="not writable"):
        check_writable(blocker / "sub")


def _rec(strategy: str, ranks: int, wps: float, placement: str = "colocated") -> RunRecord:
    workers = ranks - (1 if placement == "dedicated" else 0)
    return run_record("name=t", f"strategy.name={strategy}",
                      f"strategy.ps.placement={placement}", ranks=ranks, workers=workers,
                      words_per_s=wps, window_s=1.0, step_time={"jitter": 0.001},
                      measure={"steps": 20})


def test_report_speedup_efficiency_and_tables(tmp_path: Path) -> None:
    for rec in [_rec("horovod", 1, 100.0), _rec("horovod", 2, 180.0), _rec("horovod", 2, 190.0),
                _rec("independent", 1, 100.0), _rec("independent", 2, 200.0),
                _rec("ps", 2, 100.0, "dedicated"), _rec("ps", 3, 150.0, "dedicated")]:
        append_record(tmp_path, rec)
    (exp,) = collect(read_records(tmp_path)).values()
    h2 = exp.series["torch / fused / horovod"][1]
    assert h2.words_per_s == 185.0 and h2.repeats == 2
    assert h2.speedup == pytest.approx(1.85) and h2.efficiency == pytest.approx(92.5)
    ps3 = exp.series["torch / fused / ps-dedicated"][1]
    assert ps3.workers == 2 and ps3.speedup == pytest.approx(1.5)
    md = write_report(tmp_path, plot=True)
    assert ("|Ranks|Workers|Batch per rank|Global batch|Total time to process 20 batches (s)|"
            in md)
    assert "weak scaling (fixed batch per rank, global batch grows)" in md
    assert "|32|32 x 2 = 64|" in md
    assert "over worker ranks" in md and "|vs independent|" in md
    assert "|torch|horovod|fused|100.0|185.0 [180.0-190.0]|1.85|||0.925 at N=2|" in md
    assert (tmp_path / "report.csv").read_text().count("\n") == 1 + 6
    pngs = list(tmp_path.glob("scaling_*.png"))
    assert len(pngs) == 1 and pngs[0].read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_a_new_results_file_honours_the_umask(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        append_record(tmp_path, _named("first"))
        append_record(tmp_path, _named("second"))
    finally:
        os.umask(old)
    assert results_path(tmp_path).stat().st_mode & 0o777 == 0o666 & ~umask


@pytest.mark.parametrize("mode", [0o644, 0o664, 0o600])
def test_an_append_keeps_the_files_mode(tmp_path: Path, mode: int) -> None:
    append_record(tmp_path, _named("first"))
    results_path(tmp_path).chmod(mode)
    old = os.umask(0o077)  # the appending user's umask does not matter for an existing file
    try:
        append_record(tmp_path, _named("second"))
    finally:
        os.umask(old)
    assert results_path(tmp_path).stat().st_mode & 0o777 == mode
    assert len(read_records(tmp_path)) == 2


def test_results_that_are_not_utf8_or_not_records_are_named(tmp_path: Path) -> None:
    first = json.dumps(_BASE)
    results_path(tmp_path).write_bytes(first.encode() + b'\n\xff\xfe{"b": 2}\n')
    with pytest.raises(HvdscaleError, match=r"results.jsonl:2 is not UTF-8 text"):
        read_records(tmp_path)
    results_path(tmp_path).write_text(first + '\n"just a string"\n')
    with pytest.raises(HvdscaleError, match=r"results.jsonl:2 is not a JSON record"):
        read_records(tmp_path)


def test_results_dir_that_is_a_file_says_so(tmp_path: Path) -> None:
    f = tmp_path / "results"
    f.write_text("")
    with pytest.raises(HvdscaleError, match="is an existing file, not a directory"):
        check_writable(f)
