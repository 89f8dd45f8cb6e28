"""``precision`` and ``rnn_impl: compiled`` in one process (issue 41): the config's refusals,
the identity, autocast, fp16's loss scaler and the compiled cell. The strategies' exactness and
tolerances are the MPI cases (tests/mpi/test_precision_exactness.py, tests/mpi_ddp/)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from hvdscale.config import load_config, to_dict
from hvdscale.config.run import check_precision_device
from hvdscale.errors import ConfigError
from hvdscale.records.experiment import experiment_id, identity, record_key
from hvdscale.train.record import wire_dtype
from tests.precision_cases import adapter, precise_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("sets,words", [
    (["precision=fp8"], "precision must be one of fp32, tf32, bf16, fp16"),
    (["framework=tf", "precision=bf16"], "precision with framework=tf must be fp32"),
    (["framework=tf", "model.rnn_impl=compiled"], "model.rnn_impl compiled is PyTorch's"),
    (["strategy.name=ps", "precision=fp16"], "fp16 with strategy.name=ps is refused"),
    (["precision=fp32", "tf32=on"], "fp32 needs tf32=default or tf32=off"),
    (["model.rnn_impl=jit"], "model.rnn_impl must be .*compiled"),
])
def test_config_refuses_with_the_key_named(sets, words) -> None:
    with pytest.raises(ConfigError, match=words):
        load_config(None, sets)


def test_tf32_is_refused_on_a_cpu_and_allowed_on_a_gpu() -> None:
    with pytest.raises(ConfigError, match="tf32 is a GPU tensor-core mode"):
        check_precision_device("tf32", "cpu")
    check_precision_device("tf32", "cuda")
    check_precision_device("bf16", "cpu")


def test_run_refuses_tf32_on_the_cpu_in_one_line(tmp_path) -> None:
    out = subprocess.run([sys.executable, "-m", "hvdscale", "run", "configs/demo.yaml",
                          "--set", "precision=tf32", "--set", "strategy.name=independent",
                          "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    errors = [x for x in out.stderr.splitlines() if "error" in x]
    assert len(errors) == 1 and "precision tf32 is a GPU tensor-core mode" in errors[0], errors


def test_precision_is_part_of_the_identity() -> None:
    fp32 = to_dict(load_config(None, []))
    bf16 = to_dict(load_config(None, ["precision=bf16"]))
    before = {k: v for k, v in fp32.items() if k != "precision"}  # a record from before it
    assert identity(fp32) == identity(before)
    assert experiment_id(bf16) != experiment_id(fp32)
    assert record_key(bf16)["precision"] == "bf16" and record_key(before)["precision"] == "fp32"


def test_wire_dtype_is_the_strategys_choice() -> None:
    def wire(*sets: str) -> str:
        return wire_dtype(to_dict(load_config(None, ["precision=bf16", *sets]).strategy))

    assert wire() == "fp32"
    assert wire("strategy.horovod.compression=fp16") == "fp16"
    assert wire("strategy.name=ddp", "strategy.ddp.comm_hook=bf16") == "bf16"


def _batch(cfg):
    from tests.exactness import plan

    return next(plan(cfg, 0, 1).batches())


def _step(a, batch) -> np.ndarray:
    """The parameters' change of one plain update on ``batch``."""
    before = a.params_buffer().astype(np.float64)
    a.zero_grad()
    a.forward_backward(batch, 1.0 / batch.loss_tokens)
    a.step()
    return a.params_buffer().astype(np.float64) - before


def test_bf16_autocasts_the_forward_and_keeps_fp32_master_weights() -> None:
    fp32, bf16 = precise_config("independent", "fp32"), precise_config("independent", "bf16")
    batch = _batch(fp32)
    a32, a16 = adapter(fp32), adapter(bf16)
    assert a16.loss(batch) != a32.loss(batch)  # the forward really ran in bf16
    d32, d16 = _step(a32, batch), _step(a16, batch)
    assert a16.flat_params.dtype == a16.flat_grads.dtype == torch.float32
    rel = np.linalg.norm(d16 - d32) / np.linalg.norm(d32)
    assert 1e-5 < rel < 5e-2, rel


def test_fp16_loss_scale_comes_off_before_the_update_and_overflow_skips() -> None:
    fp32, fp16 = precise_config("independent", "fp32"), precise_config("independent", "fp16")
    batch = _batch(fp32)
    d32 = _step(adapter(fp32), batch)
    a16 = adapter(fp16)
    d16 = _step(a16, batch)
    assert np.linalg.norm(d16 - d32) / np.linalg.norm(d32) < 1e-2  # the 2^16 scale is gone
    group = a16.optimizer.param_groups[0]
    group["loss_scale"] = 2.0**200  # the scaled backward overflows
    before = a16.params_buffer().copy()
    _step(a16, batch)
    assert np.array_equal(a16.params_buffer(), before)  # skipped, nothing changed
    state = a16.precision_info()["loss_scaler"]
    assert state["skipped_steps"] == 1 and state["loss_scale"] == 2.0**199


def test_compiled_loop_compiles_and_matches_the_eager_loop() -> None:
    from torch._dynamo.utils import counters

    loop, comp = precise_config("independent", "fp32"), precise_config(
        "independent", "fp32", "compiled")
    batch = _batch(loop)
    frames = counters["stats"]["unique_graphs"]
    a = adapter(comp)
    timing = a.precompile(batch)
    assert counters["stats"]["unique_graphs"] > frames  # dynamo really compiled the cell
    assert timing["compile_s"] > 0 and timing["compiled_pass_s"] < timing["first_pass_s"]
    assert adapter(loop).precompile(batch) is None  # nothing to compile: nothing recorded
    d_eager, d_comp = _step(adapter(loop), batch), _step(a, batch)
    assert np.linalg.norm(d_comp - d_eager) / np.linalg.norm(d_eager) < 1e-5


def test_report_sections_name_the_precision() -> None:
    from hvdscale.records.experiment import differences

    fp32 = to_dict(load_config(None, []))
    bf16 = to_dict(load_config(None, ["precision=bf16"]))
    assert differences({"a": fp32, "b": bf16}) == {"a": {"precision": "fp32"},
                                                   "b": {"precision": "bf16"}}
    assert differences({"a": fp32}) == {"a": {}}


def test_a_run_records_precision_wire_and_compile_time(tmp_path) -> None:
    out = subprocess.run([sys.executable, "-m", "hvdscale", "run", "configs/demo.yaml",
                          "--set", "precision=bf16", "--set", "model.rnn_impl=compiled",
                          "--set", "strategy.name=independent", "--set", "model.hidden_size=32",
                          "--set", "measure.warmup_steps=1", "--set", "measure.steps=1",
                          "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    from hvdscale.records.run import RunRecord
    from hvdscale.records.store import read_records

    rec = read_records(tmp_path)[-1]
    assert isinstance(rec, RunRecord) and rec.precision is not None
    assert rec.precision["compute"] == "bf16" and rec.precision["grads"] == "float32"
    assert rec.precision["wire"].startswith("none") and rec.key["precision"] == "bf16"
    took = rec.compile
    assert took is not None and took["compile_s"] > 0
    assert took["first_pass_s"] > took["compiled_pass_s"]
