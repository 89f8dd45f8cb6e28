"""hvdscale.study.stepcost.gemm: the three RNN-layer GEMMs, their FLOP counts, the findings, and bad
input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hvdscale.errors import HvdscaleError
from hvdscale.study.stepcost import gemm, gemm_findings, gemm_report


def _effective(lay: gemm.Layout) -> tuple[tuple[int, int], tuple[int, int]]:
    a = lay.a[::-1] if lay.ta else lay.a
    b = lay.b[::-1] if lay.tb else lay.b
    return a, b


@pytest.mark.parametrize("variant,out", [("NN", ("M", "N")), ("TN", ("K", "N")),
                                         ("NT", ("M", "K"))])
def test_layouts_are_the_rnn_products_and_their_twins(variant: str, out: tuple) -> None:
    m, n, k = 12, 5, 3
    dims = {"M": m, "N": n, "K": k}
    for lay in gemm.layouts(variant, m, n, k):  # the call and its pre-transposed twin
        a, b = _effective(lay)
        assert a[1] == b[0], lay
        assert (a[0], b[1]) == (dims[out[0]], dims[out[1]])
        assert a[0] * a[1] * b[1] == m * n * k  # same product, 2MNK flops


def _fresh_sweep(framework: str) -> dict:
    # A fresh interpreter: TensorFlow's thread pools can be sized only before its runtime
    # starts, and another test in this process may have started it already.
    code = ("import json; from hvdscale.study.stepcost import gemm; "
            "print(json.dumps(gemm.measure_framework("
            f"{framework!r}, gemm.GemmSpec([8], [3, 4], threads=1, gates=4, repeats=2, warmup=1, "
            "min_time_s=1e-4, peak_size=32))))")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_tiny_sweep_has_all_variants_with_2mnk_flops(framework: str) -> None:
    res = _fresh_sweep(framework)
    assert {(r["batch"], r["variant"]) for r in res["rows"]} == {
        (b, v) for b in (3, 4) for v in ("NN", "TN", "NT")}
    for r in res["rows"]:
        assert (r["M"], r["N"], r["K"]) == (32, r["batch"], 8)
        assert r["flops"] == 2 * 32 * r["batch"] * 8
        assert r["gflops"] == pytest.approx(r["flops"] / r["time_s"] / 1e9)
        assert r["frac_peak"] == pytest.approx(r["gflops"] / res["peak"]["gflops"])
        assert len(r["times_s"]) == len(r["twin_times_s"]) == 2
    assert res["peak"]["gflops"] > 0 and res["clock"] == "cpu"


def _row(h: int, b: int, v: str, g: float, twin: float) -> dict:
    return {"hidden": h, "batch": b, "variant": v, "gflops": g, "time_s": 1 / g,
            "twin_time_s": 1 / twin, "twin_times_s": [1 / twin] * 3,
            "twin_wins": 3 if twin > g else 0}


def test_findings_name_slower_larger_batches_and_pretranspose_wins() -> None:
    rows = [_row(512, 32, "NN", 100, 100), _row(512, 33, "NN", 60, 60),
            _row(512, 64, "NN", 110, 110),
            _row(512, 32, "TN", 50, 90), _row(512, 33, "TN", 50, 90),
            _row(512, 64, "TN", 80, 90)]
    drops = gemm_findings.slower_with_larger_batch(rows)
    assert [(d["variant"], d["from_batch"], d["to_batch"]) for d in drops] == [("NN", 32, 33)]
    (win,) = gemm_findings.pretranspose_wins(rows)
    assert (win["variant"], win["batches"], win["consistent"]) == ("TN", [32, 33, 64], True)


@pytest.mark.parametrize("text", ["", "0", "16,-1", "16,x", "1.5", "70000"])
def test_bad_sizes_are_one_clear_error(text: str) -> None:
    with pytest.raises(HvdscaleError, match="--batch"):
        gemm.parse_sizes(text, "--batch")


def test_unknown_framework_is_an_error() -> None:
    with pytest.raises(HvdscaleError, match="unknown framework 'mxnet'"):
        gemm.parse_frameworks("torch,mxnet")
    assert gemm.parse_frameworks("tf,torch,tf") == ["tf", "torch"]


def test_layer_rate_is_the_harmonic_mean_of_the_three_gemms() -> None:
    from hvdscale.study.stepcost.batch import layer_gflops

    rows = [{"batch": 8, "variant": v, "gflops": g} for v, g in zip(
        ("NN", "TN", "NT"), (10.0, 20.0, 40.0), strict=True)]
    # Equal work each: total time 1/10 + 1/20 + 1/40 per unit, three units.
    assert layer_gflops(rows, 8) == pytest.approx(3 / (0.1 + 0.05 + 0.025))


def test_clock_is_cpu_time_for_one_thread_wall_time_for_more() -> None:
    assert gemm.resolve_clock("auto", 1) == "cpu"
    assert gemm.resolve_clock("auto", 2) == "wall"
    assert gemm.resolve_clock("wall", 1) == "wall"
    with pytest.raises(HvdscaleError, match="--clock"):
        gemm.resolve_clock("tsc", 1)


def test_batch_growth_reads_x32_over_1_and_multiples_of_32() -> None:
    from hvdscale.study.stepcost.gemm_findings import batch_growth

    rows = [{"hidden": 8, "variant": "NN", "batch": b, "gflops": g}
            for b, g in ((1, 2.0), (31, 20.0), (32, 28.0), (33, 20.0))]
    (e,) = batch_growth(rows)
    assert e["x32_over_1"] == pytest.approx(14.0)
    assert e["multiples_of_32"] == {32: pytest.approx(1.4)}


def test_gpu_and_tf32_refused_clearly_where_they_cannot_run() -> None:
    torch = pytest.importorskip("torch")
    from hvdscale.errors import HvdscaleError
    from hvdscale.frameworks.torch import gemm as tg

    with pytest.raises(HvdscaleError, match="tf32 is a GPU"):
        tg.backend(1, "cpu", "tf32")
    if not torch.cuda.is_available():
        with pytest.raises(HvdscaleError, match="torch sees no GPU"):
            tg.backend(1, "cuda", "fp32")
    with pytest.raises(HvdscaleError, match="only --framework torch"):
        gemm.measure_framework("tf", gemm.GemmSpec([8], [1], precisions=("bf16",)),
                               precision="bf16")


def test_bf16_rows_are_timed_and_labelled(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "TF_NUM_INTRAOP_THREADS"):  # run_gemm sets them: restored after the test
        monkeypatch.setenv(var, os.environ.get(var, "1"))
    spec = gemm.GemmSpec([8], [1, 2], repeats=1, warmup=0, min_time_s=0.001, peak_size=64,
                         precisions=("fp32", "bf16"))
    rec = gemm.run_gemm(["torch"], spec)
    assert [(r["framework"], r["precision"], r["device"]) for r in rec.frameworks] == [
        ("torch", "fp32", "cpu"), ("torch", "bf16", "cpu")]
    assert "torch bf16, hidden 8" in gemm_report.markdown(rec)
    assert gemm.resolve_clock("auto", 1, "cuda") == "wall"
    with pytest.raises(HvdscaleError, match="cannot time GPU work"):
        gemm.resolve_clock("cpu", 1, "cuda")
