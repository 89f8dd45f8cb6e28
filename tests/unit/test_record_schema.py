"""hvdscale.records.schema: the one schema version every writer stamps, and the accessors the
report and the predictor read records through (their defaults are what old records rely on)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hvdscale.records import schema

ROOT = Path(__file__).resolve().parents[2]


def test_a_record_without_kind_is_a_run() -> None:
    # Records written before study tools had kinds carry none: they are training runs.
    assert schema.ok_run({"status": "ok"})
    assert not schema.ok_run({"status": "ok", "kind": "gemm"})
    assert not schema.ok_run({"status": "failed"})
    assert schema.kind({"kind": "profile"}) == "profile"


def test_optional_fields_default_as_the_readers_expect() -> None:
    assert schema.intra_op_threads({}) == 1
    assert schema.intra_op_threads({"threads": {"intra_op": None}}) == 1
    assert schema.intra_op_threads({"threads": {"intra_op": 4}}) == 4
    assert schema.hosts({"hosts": None}) == []
    assert schema.idle({"idle": None}) == {}
    assert schema.startup({"startup": "not marks"}) is None
    assert schema.config_or_empty({"config": None}) == {}
    # A run that measured no straggler idle (independent, one rank) waited for no one.
    assert schema.idle_fraction({}) == 0.0 and schema.idle_ms_per_step({"idle": None}) == 0.0
    assert schema.idle_per_rank({"idle": {"idle_fraction": 0.1}}) == []
    assert schema.idle_fraction({"idle": {"idle_fraction": 0.25}}) == 0.25
    assert schema.compile_info({"compile": None}) == {}
    assert schema.configured_precision({"config": {}}) == "fp32"
    assert schema.error({"status": "failed"}) == ""


def test_timeline_summary_is_empty_unless_captured() -> None:
    summary = {"median": {"allreduce_ms": 2.0}}
    assert schema.timeline_summary({"strategy": {"timeline": {"summary": summary}}}) == summary
    for rec in ({}, {"strategy": None}, {"strategy": {"timeline": {}}},
                {"strategy": {"timeline": {"summary": None}}}):
        assert schema.timeline_summary(rec) == {}


def test_required_fields_raise_as_the_dict_would() -> None:
    # predict's record check turns a KeyError into its one-line error: it must still come.
    for read in (schema.workers, schema.words, schema.window_s, schema.measured_steps,
                 schema.config, schema.strategy_name, schema.step_median_s, schema.measure,
                 schema.padding_window, schema.model_config, schema.horovod_settings,
                 schema.precision_in_force, schema.memory, schema.model_params):
        with pytest.raises(KeyError):
            read({})


def test_every_writer_stamps_the_one_schema_version() -> None:
    # A literal version in a writer would drift from the readers' when the schema changes.
    out = subprocess.run(["git", "grep", "-nE", "\"schema\": *[0-9]", "--", "hvdscale"],
                         cwd=ROOT, capture_output=True, text=True).stdout
    assert out == ""
    assert schema.SCHEMA_VERSION == 1
