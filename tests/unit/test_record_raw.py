"""Every run record keeps its raw measurements (issue 61): each computing rank's per-step times
and words, from which the record's (and the report's) figures recompute; ``steps`` gives them
as a long table, ``rows`` stays flat without them. And the compatibility rule of
docs/records.md, both ways: an older reader ignores a field it does not know (with a note), a
newer reader reads a file written before a field was added."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

import hvdscale.records as records
from hvdscale.core.meter import StepMeter, idle_times, spread, summarize
from hvdscale.records.kinds import KINDS, typed
from hvdscale.records.migrate import SCHEMA_VERSION
from hvdscale.records.run import RunRecord
from hvdscale.study.report.points import collect
from tests.records_fixture import run_dict
from tests.unit.test_typed_records import _first_run


def _ranks(steps: int = 40, seed: int = 3) -> list[dict]:
    """Two ranks' real ``rank_summary`` with uneven, known step times and words."""
    rng = random.Random(seed)
    out = []
    for r in range(2):
        m = StepMeter(warmup_steps=1)
        for step in range(-1, steps):
            m.start_step()
            m.end_step(step, words=rng.randint(80, 120), loss_tokens=50, padded=150,
                       sentences=4, loss_sum=5.0, compute_s=0.01 * rng.random())
        m.step_times = [0.05 + 0.02 * rng.random() + 0.01 * r for _ in range(steps)]
        m.window_start, m.window_end = 0.0, sum(m.step_times)
        out.append({**m.rank_summary(), "rank": r})
    return out


def _record(ranks: list[dict]) -> RunRecord:
    """The record the meter's window makes, written to JSON and read back as a file is."""
    window = summarize(ranks, [0, 1], True)
    line = json.dumps(run_dict(ranks=2, **window), allow_nan=True)
    return typed(json.loads(line), "results.jsonl:1")  # type: ignore[return-value]


def test_the_record_keeps_every_ranks_steps_and_its_figures_recompute_from_them() -> None:
    rec = _record(_ranks())
    raw = rec.raw
    assert raw is not None and raw.ranks == [0, 1]
    assert [len(x) for x in raw.step_s] == [40, 40] and [len(x) for x in raw.words] == [40, 40]
    assert [len(x) for x in raw.warmup_s] == [1, 1]
    # The job's step is its slowest rank's; the median, jitter and interval the report shows.
    job = np.max(np.array(raw.step_s), axis=0)
    again = spread(job)
    for key in ("n", "median", "jitter", "mean", "ci95", "min", "max"):
        assert again[key] == pytest.approx(getattr(rec.step_time, key), abs=2e-6), key
    assert sum(map(sum, raw.words)) == rec.words
    assert rec.words / rec.window_s == pytest.approx(rec.words_per_s)
    assert [sum(x) for x in raw.step_s] == pytest.approx([t.step_s for t in rec.rank_times],
                                                         abs=1e-4)
    idle = idle_times([{"rank": r, "step_times": s, "compute_times": c, "batches": len(s),
                        "idle_steps": 0, "window_s": t.window_s}
                       for r, s, c, t in zip(raw.ranks, raw.step_s, raw.compute_s,
                                             rec.rank_times, strict=True)])
    assert idle["idle_ms_per_step"] == pytest.approx(rec.idle.idle_ms_per_step, abs=1e-3)
    # What the report prints for the point: its jitter, recomputed from the file alone.
    (exp,) = collect([rec]).values()
    (point,) = [p for s in exp.series.values() for p in s]
    assert point.jitter_ms == pytest.approx(again["jitter"] * 1e3, abs=1e-3)


def test_steps_is_the_long_table_and_rows_stay_flat() -> None:
    rec = _record(_ranks(steps=12))
    table = records.steps([rec])
    assert len(table) == 2 * 12
    assert table[13] == {"record": 0, "name": rec.name, "strategy": rec.strategy_name,
                         "ranks": 2, "rank": 1, "step": 1, "step_s": rec.raw.step_s[1][1],
                         "compute_s": rec.raw.compute_s[1][1], "words": rec.raw.words[1][1]}
    (row,) = records.rows([rec])
    assert not any(k == "raw" or k.startswith("raw.") for k in row)
    assert row["step_time.median"] == rec.step_time.median


def test_an_older_reader_ignores_a_field_it_does_not_know_with_a_note(
        capsys: pytest.CaptureFixture[str]) -> None:
    newer = {**_first_run(), "from_a_newer_hvdscale": [1, 2],
             "step_time": {**_first_run()["step_time"], "p99": 0.5}}
    for n in (3, 4):
        rec = typed(newer, f"f:{n}")
        assert isinstance(rec, RunRecord) and rec.step_time.median > 0
    err = capsys.readouterr().err.splitlines()
    assert err == ["hvdscale: note: f:3: field 'from_a_newer_hvdscale' is not one this "
                   "hvdscale's run record knows (a newer hvdscale's?); ignored"]
    assert "from_a_newer_hvdscale" not in rec.to_dict() and "p99" not in rec.to_dict()["step_time"]


def test_a_newer_reader_reads_a_file_from_before_a_field_was_added() -> None:
    older = {k: v for k, v in _first_run().items() if k not in ("raw", "cpu_busy")}
    rec = typed(older, "f:1")
    assert isinstance(rec, RunRecord) and rec.raw is None and rec.cpu_busy is None
    assert records.steps([rec]) == []
    assert rec.to_dict()["schema"] == SCHEMA_VERSION and "raw" not in rec.to_dict()


REQUIRED = {
    "run": 43, "failed": 5, "launch": 4, "gemm": 16, "batch": 14, "profile": 15,
    "commbench": 12, "mutation": 19, "startup_bench": 10,
    # kinds new at schema 2 (issue 60: a launch's plan and its state lines)
    "launch_plan": 2, "point_state": 3,
}
"""Each kind's required fields at schema 2: a field added since must be optional."""


def test_a_field_added_without_raising_the_schema_number_is_optional() -> None:
    import msgspec

    for kind, cls in KINDS.items():
        required = [f.name for f in msgspec.structs.fields(cls) if f.required]
        assert len(required) == REQUIRED[kind], (
            f"{kind}: {len(required)} required fields, schema {SCHEMA_VERSION} had "
            f"{REQUIRED[kind]}: give the new one a default (an older file lacks it), or raise "
            "the schema number with a migration step (hvdscale/records/migrate.py)")
