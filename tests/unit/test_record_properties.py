"""The typed records' attributes and properties the report, the predictor and the sweep read
(``hvdscale.records.run.RunRecord``, ``hvdscale.records.failed.FailedRecord``): their defaults
are what old records rely on, and the one schema version every writer stamps."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hvdscale.config import RunConfig, to_dict
from hvdscale.records.failed import FailedRecord
from hvdscale.records.fields import RecordError
from hvdscale.records.kinds import typed
from hvdscale.records.migrate import SCHEMA_VERSION
from hvdscale.records.run import RunRecord
from tests.records_fixture import failed_dict, gemm_record, run_dict, run_record

ROOT = Path(__file__).resolve().parents[2]


def _v1(rec: dict) -> dict:
    """``rec`` as version 1 wrote it: no schema stamp, and no kind."""
    return {k: v for k, v in rec.items() if k not in ("schema", "kind")}


def test_a_record_without_kind_is_a_run_and_a_failed_one_a_failed_point() -> None:
    # Records written before study tools had kinds carry none: they are training runs.
    run = typed(_v1(run_dict()))
    assert isinstance(run, RunRecord) and run.kind == "run" and run.ok
    failed = typed({**_v1(failed_dict()), "kind": "run"})  # version 1: a run that failed
    assert isinstance(failed, FailedRecord) and failed.kind == "failed" and not failed.ok
    assert not isinstance(gemm_record(), RunRecord) and gemm_record().kind == "gemm"


def test_optional_fields_default_as_the_readers_expect() -> None:
    rec = run_record()
    assert rec.intra_op_threads == 1
    assert run_record(threads={"intra_op": 4}).intra_op_threads == 4
    assert run_record(threads={"intra_op": 0}).intra_op_threads == 1
    assert rec.startup is None and rec.interval is None and rec.launch is None
    assert rec.compile is None and rec.quality is None and rec.quality_or_empty == {}
    # A run that measured no straggler idle (independent, one rank) waited for no one.
    assert rec.idle.present() == [] and rec.idle_fraction == 0.0 and rec.idle_ms_per_step == 0.0
    assert run_record(idle={"idle_fraction": 0.1}).idle_per_rank == []
    assert run_record(idle={"idle_fraction": 0.25}).idle_fraction == 0.25
    no_precision = {k: v for k, v in to_dict(rec.config).items() if k != "precision"}
    assert run_record(config=no_precision).configured_precision == "fp32"
    assert run_record(warmup_time_s=0.0).warmup_s == 0.0
    bare = typed({k: v for k, v in failed_dict().items() if k not in ("config", "key", "name",
                                                                        "workers")})
    assert isinstance(bare, FailedRecord) and bare.config is None and bare.strategy_name is None


def test_derived_figures_read_their_sections() -> None:
    rec = run_record("strategy.name=ps", "measure.steps=7", step_time={"median": 0.25})
    assert rec.strategy_name == "ps" and rec.measured_steps == 7 and rec.step_median_s == 0.25
    assert rec.model_config == rec.config.model and rec.model_config.kind == "nmt"
    assert rec.horovod_settings == rec.config.strategy.horovod
    assert failed_dict("strategy.name=ps")["config"]["strategy"]["name"] == "ps"
    assert typed(failed_dict("strategy.name=ps")).strategy_name == "ps"


def test_timeline_summary_is_empty_unless_captured() -> None:
    summary = {"median": {"allreduce_ms": 2.0}}
    assert run_record(strategy={"timeline": {"summary": summary}}).timeline_summary == summary
    for strategy in ({}, {"timeline": None}, {"timeline": {}}, {"timeline": {"summary": None}}):
        assert run_record(strategy=strategy).timeline_summary == {}


@pytest.mark.parametrize("field", ["workers", "words", "window_s", "measure", "config",
                                   "step_time", "padding", "memory", "model_params",
                                   "words_per_s", "rank_times", "status"])
def test_a_record_without_a_field_readers_need_is_refused_naming_it(field: str) -> None:
    rec = {k: v for k, v in run_dict().items() if k != field}
    with pytest.raises(RecordError, match=f"field '{field}' of a run record is missing"):
        typed(rec, "results.jsonl:3")


def test_a_records_config_is_the_typed_run_config_with_defaults_for_older_keys() -> None:
    # A key an older writer left out reads as its default (precision, tf32, a custom model's
    # fields came later); the file keeps every key, so other languages need no defaults table.
    rec = run_record(config={"strategy": {"name": "ps", "ps": {"num_servers": 2}}})
    assert isinstance(rec.config, RunConfig) and rec.strategy_name == "ps"
    assert rec.config.strategy.ps.num_servers == 2 and rec.config.precision == "fp32"
    assert rec.to_dict()["config"] == to_dict(rec.config)
    assert rec.to_dict()["config"]["strategy"]["horovod"]["overlap"] == "hooks"


def test_a_records_config_is_checked_as_a_run_config_in_one_line() -> None:
    big = {"strategy": {"name": "horovod", "horovod": {"fusion_threshold_mb": 9000}}}
    with pytest.raises(RecordError, match=r"^results.jsonl:2: field 'config' of a run record: "
                                          r"strategy.horovod.fusion_threshold_mb must be in"):
        typed({**run_dict(), "config": big}, "results.jsonl:2")
    word = {"strategy": {"name": "horovod", "horovod": {"op": "max"}}}
    with pytest.raises(RecordError, match=r"^results.jsonl:2: field 'config.strategy.horovod.op'"
                                          r": invalid enum value 'max'$"):
        typed({**run_dict(), "config": word}, "results.jsonl:2")
    unknown = {**run_dict(), "config": {"strategy": {"name": "unheard-of"}}}
    with pytest.raises(RecordError, match=r"field 'config' of a run record: .*unheard-of"):
        typed(unknown, "results.jsonl:3")


def test_every_writer_stamps_the_one_schema_version() -> None:
    # A literal version in a writer would drift from the readers' when the schema changes.
    out = subprocess.run(["git", "grep", "-nE", "\"schema\": *[0-9]", "--", "hvdscale"],
                         cwd=ROOT, capture_output=True, text=True).stdout
    assert out == ""
    assert run_record().to_dict()["schema"] == SCHEMA_VERSION
    assert typed(_v1(run_dict())).to_dict()["schema"] == SCHEMA_VERSION
