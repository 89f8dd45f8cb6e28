"""Typed records (issue 51): every field said once, written once, read back checked.

The files under bench/results are the old versions a reader must keep reading; the meter's
real ``summarize`` stands for the writers (a field it sets that the record declares for another
writer is the ``loadavg`` collision come back).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import hvdscale.records as records
from hvdscale.core.meter import summarize
from hvdscale.records.docs import json_schema
from hvdscale.records.failed import FailedRecord
from hvdscale.records.fields import RecordError
from hvdscale.records.kinds import KINDS, typed
from hvdscale.records.migrate import SCHEMA_VERSION
from hvdscale.records.run import RunRecord
from hvdscale.records.sections import METER

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
ONE_RUN = RESULTS / "h100_2026-11-27b" / "cpu" / "round1" / "demo" / "results.jsonl"


def _first_run() -> dict:
    return json.loads(ONE_RUN.read_text().splitlines()[0])


def test_every_record_under_bench_results_reads() -> None:
    got = records.read(RESULTS)
    kinds = Counter(r.kind for r in got)
    assert kinds["run"] >= 130 and kinds["failed"] >= 2 and kinds["launch"] >= 29, kinds
    for name in ("gemm.json", "batch_demo.json", "commbench_np2.json", "mutation.json",
                 "startup_issue50.json", "profile_torch.json"):
        assert records.read(RESULTS / name), name


def test_a_version_1_failed_point_reads_as_a_failed_record() -> None:
    rec = typed({"schema": 1, "status": "failed", "started": "s", "finished": "f", "ranks": 2,
                 "error": "exit 1: boom", "config": {"strategy": {"name": "ps"}}})
    assert isinstance(rec, FailedRecord) and rec.strategy_name == "ps"
    assert rec.to_dict()["kind"] == "failed" and rec.to_dict()["schema"] == SCHEMA_VERSION


@pytest.mark.parametrize("version, said", [(SCHEMA_VERSION + 1, "newer hvdscale"),
                                           ("2", "version number"), (0, "version number")])
def test_a_version_it_cannot_read_is_refused(version: object, said: str) -> None:
    with pytest.raises(RecordError, match=said):
        typed({**_first_run(), "schema": version}, "f:3")


def test_a_wrong_or_missing_field_is_named() -> None:
    good = _first_run()
    with pytest.raises(RecordError, match=r"f:3: field 'words_per_s' should be float"):
        typed({**good, "words_per_s": "fast"}, "f:3")
    with pytest.raises(RecordError, match=r"f:3: field 'step_time.median' of a run record is "
                                          r"missing"):
        typed({**good, "step_time": {k: v for k, v in good["step_time"].items()
                                     if k != "median"}}, "f:3")
    with pytest.raises(RecordError, match=r"field 'words' of a run record is missing"):
        typed({k: v for k, v in good.items() if k != "words"}, "f:3")
    with pytest.raises(RecordError, match=r"should be int, got bool"):
        typed({**good, "ranks": True}, "f:3")


def test_a_field_set_by_two_writers_is_refused_naming_both() -> None:
    parts = {k: v for k, v in _first_run().items() if k not in ("schema", "kind")}
    mine = {k: v for k, v in parts.items() if k != "loadavg"}
    with pytest.raises(RecordError, match=r"'loadavg'.*both identity and meter"):
        RunRecord.assemble({"identity": parts, "meter": {"loadavg": [9.0, 9.0, 9.0]}})
    rec = RunRecord.assemble({"identity": mine, "meter": {"loadavg": [1.0, 1.0, 1.0]}})
    with pytest.raises(RecordError, match="'quality'"):
        rec.fill(quality={"until": {}})
        rec.fill(quality={"until": {}})


def _rank(rank: int) -> dict:
    return {"rank": rank, "words": 100, "window_s": 1.0, "step_times": [0.1] * 10,
            "compute_times": [0.08] * 10, "warmup_times": [0.2], "sentences": 4,
            "step_words": [10] * 10,
            "loss_tokens": 90, "loss_sum": 180.0, "padded_tokens": 120, "batches": 10,
            "idle_steps": 0, "cpu_s": 0.5}


def test_the_meter_writes_only_the_fields_declared_for_it() -> None:
    """The real summarize against the declarations: a field it sets that another writer owns
    (``loadavg``, declared for train/record.py) would be set twice."""
    window = summarize([_rank(0), _rank(1)], [0, 1], True)
    props = json_schema()["$defs"]["RunRecord"]["properties"]
    declared = {name for name, p in props.items() if p.get("x-writer") == METER}
    assert set(window) == declared


def test_rows_are_flat_with_dotted_names() -> None:
    (row,) = records.rows([typed(_first_run())])
    assert row["kind"] == "run" and row["step_time.median"] > 0
    assert row["config.strategy.name"] == "horovod"
    assert isinstance(row["per_rank_words_per_s"], list)
    assert not any(isinstance(v, dict) and v for v in row.values())


def test_the_json_schema_holds_every_record_and_refuses_a_wrong_one() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json_schema()
    validator = jsonschema.Draft202012Validator(schema)
    recs = records.read(RESULTS)
    for kind in KINDS:
        some = [r for r in recs if r.kind == kind][:3]
        for rec in some:
            validator.validate(rec.to_dict())
    bad = {**typed(_first_run()).to_dict(), "words_per_s": "fast"}
    assert not validator.is_valid(bad)


def test_a_bad_record_file_is_one_line_naming_the_field(tmp_path: Path) -> None:
    bad = {**_first_run(), "ranks": "two"}
    (tmp_path / "results.jsonl").write_text(json.dumps(bad) + "\n")
    got = subprocess.run([sys.executable, "-m", "hvdscale", "report", str(tmp_path)],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert got.returncode != 0
    assert "Traceback" not in got.stderr
    assert "results.jsonl:1: field 'ranks' should be int" in got.stderr
    assert len(got.stderr.strip().splitlines()) == 1, got.stderr
