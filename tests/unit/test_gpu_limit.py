"""The single-GPU "how close to the limit" table (each part of the step against the GEMM it
really runs, issue 38 failure 8) and the prepared GPU script's refusal on a
machine without a GPU (issue 31)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from hvdscale.config import load_config
from hvdscale.records.gemm import GemmRecord
from hvdscale.records.run import RunRecord
from hvdscale.records.store import read_records
from hvdscale.study.stepcost.gpu_limit import gemm_parts, limit_rows, main, markdown, reference_rate
from hvdscale.study.stepcost.step_flops import flops_per_word
from tests.records_fixture import gemm_record, run_record

ROOT = Path(__file__).resolve().parents[2]


H100 = ROOT / "bench" / "results" / "h100_2026-11-27" / "gpu"


def _run(impl: str, words_per_s: float, precision: str = "fp32", tf32: str = "off"
         ) -> RunRecord:
    cfg = load_config("configs/nmt_torch.yaml", [f"model.rnn_impl={impl}", f"tf32={tf32}",
                                                 f"precision={precision}"])
    b = cfg.data.batch_size  # 10 steps of 100 source and 110 target tokens a sentence
    return run_record(cfg=cfg, words_per_s=words_per_s, ranks=1, workers=1,
                      sentences=10 * b, words=10 * b * 210, loss_tokens=10 * b * 110,
                      device={"gpu": {"model": "NVIDIA H100"}})


def _gemm(rates: dict[tuple[int, int, int, str], float], peak: float,
          **peaks: float) -> GemmRecord:
    """A GEMM record: fp32 rows at ``rates`` and ``peak``; other precisions' peaks by name."""
    rows = [{"M": m, "K": k, "N": n, "variant": v, "hidden": k, "batch": n, "gflops": g}
            for (m, k, n, v), g in rates.items()]
    return gemm_record(
        frameworks=[{"precision": "fp32", "rows": rows, "peak": {"gflops": peak}}]
        + [{"precision": p, "rows": [], "peak": {"gflops": g}} for p, g in peaks.items()])


def test_each_part_is_charged_its_own_gemm_and_the_fraction_is_their_time_over_the_step(
        ) -> None:
    run = _run("fused", 50000.0)
    parts = gemm_parts(run)
    # the input projection of the decoder's first layer: one GEMM over batch x time
    assert {"part": "input projections", "M": 2048, "K": 512, "N": 384 * 110, "count": 1,
            "variant": "NN", "flops": 2.0 * 2048 * 512 * 384 * 110} in parts
    rec = [p for p in parts if p["part"] == "recurrent products" and p["N"] == 384]
    assert {p["count"] for p in rec} == {100, 110} and {p["variant"] for p in rec} == {"NN", "TN"}
    # the same flops as the useful-work count (flops per word, source and target halves)
    total = sum(p["flops"] for p in parts)
    fpw = flops_per_word(run.config.model)["total"]
    assert total == pytest.approx(fpw * run.words / 10, rel=0.03)
    # the decoder's recurrent forward (4 layers) is on the curve at 10 TFLOP/s; nothing else
    gemm = _gemm({(2048, 512, 384, "NN"): 10000.0, (2048, 512, 256, "NN"): 99000.0}, 40000.0)
    on = [p for p in rec if p["M"] == 2048 and p["variant"] == "NN"]
    assert len(on) == 4 and reference_rate(gemm, on[0], "fp32") == (1e13, "curve")
    assert reference_rate(gemm, parts[0], "fp32") == (99e12, "fastest measured")
    (row,) = limit_rows([run], gemm)
    flops_on = sum(p["flops"] for p in on)
    best = flops_on / 1e13 + (total - flops_on) / 99e12
    step = 210 * 384 / 50000.0
    assert row["best_s"] == pytest.approx(best) and row["step_s"] == pytest.approx(step)
    assert row["fraction"] == pytest.approx(best / step) and not row["wrong_reference"]
    assert row["useful_tflops"] == pytest.approx(total / step / 1e12)
    # a step faster than its reference: the reference is wrong, and the table says so
    (fast,) = limit_rows([_run("fused", 5e6)], gemm)
    assert fast["fraction"] > 1 and fast["wrong_reference"]
    assert "WRONG REFERENCE" in markdown([fast])


def test_the_h100_seed_runs_stay_below_their_gemms_best_times() -> None:
    """The H100's own seed runs and GEMM curves (bench/results): the old per-time-step
    reference read 131 % for the fused step; every part's own GEMM leaves it below 100 %."""
    (gemm,) = read_records(H100 / "gemm" / "results.jsonl")
    seeds = read_records(H100 / "seeds" / "results.jsonl")
    assert isinstance(gemm, GemmRecord) and all(isinstance(r, RunRecord) for r in seeds)
    rows = limit_rows(seeds, gemm)
    assert {r["impl"] for r in rows} == {"fused", "loop"}
    for r in rows:
        assert r["fraction"] is not None and 0 < r["fraction"] <= 1.0, r
        assert not r["wrong_reference"]
    fused = next(r for r in rows if r["impl"] == "fused")
    assert fused["useful_tflops"] > 30  # the step really is fast: the reference was the fault


def test_main_reads_a_results_folder(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "seeds").mkdir()
    (tmp_path / "gemm").mkdir()
    (tmp_path / "seeds" / "results.jsonl").write_text(
        json.dumps(_run("loop", 40000.0).to_dict()) + "\n")
    (tmp_path / "gemm" / "results.jsonl").write_text(
        json.dumps(_gemm({(2048, 512, 384, "NN"): 30000.0}, 40000.0).to_dict()) + "\n")
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "|NVIDIA H100|loop|fp32|40,000|43,398 / 39,369|2016.0|" in out
    assert main([str(tmp_path / "missing")]) == 2


def test_each_run_is_charged_its_own_precisions_gemms(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    """A bf16 run against the bf16 curve, TF32 against TF32's; a compiled loop has a row (the
    notes have no figure for it); a folder without GEMM curves takes them from a second one."""
    gemm = _gemm({}, 50000.0, tf32=400000.0, bf16=800000.0)
    runs = [_run("fused", 9e4), _run("loop", 9e4, "tf32", tf32="default"),
            _run("compiled", 9e4, "bf16")]
    rows = limit_rows(runs, gemm)
    assert [r["precision"] for r in rows] == ["fp32", "tf32", "bf16"]
    # the same shapes at 8x and 16x the rate: an eighth and a sixteenth of the best time
    assert rows[1]["best_s"] == pytest.approx(rows[0]["best_s"] / 8)
    assert rows[2]["best_s"] == pytest.approx(rows[0]["best_s"] / 16)
    (tmp_path / "out" / "seeds").mkdir(parents=True)
    (tmp_path / "out" / "seeds" / "results.jsonl").write_text(
        "".join(json.dumps(r.to_dict()) + "\n" for r in runs))
    (tmp_path / "curves").mkdir()
    (tmp_path / "curves" / "results.jsonl").write_text(json.dumps(gemm.to_dict()) + "\n")
    assert main([str(tmp_path / "out"), str(tmp_path / "curves")]) == 0
    out = capsys.readouterr().out
    assert "|NVIDIA H100|compiled|bf16|90,000|-|" in out
    assert f"GEMM curves: {tmp_path / 'curves'}" in out and "|-|-|" not in out


def test_gpu_script_refuses_without_a_gpu_in_one_line(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    r = subprocess.run(["bash", "evidence/gpu_device.sh", str(tmp_path / "bundle"),
                        str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]
    assert r.stderr.startswith("gpu_device: ERROR: no GPU visible to torch")
    assert not (tmp_path / "out").exists()  # nothing installed or written


def test_gpu_script_main_path_runs_where_torch_sees_a_gpu(tmp_path: Path) -> None:
    """The path a real GPU takes (no --rehearse-cpu, REHEARSE unset) through the script's own
    shell, up to the limit stage. This machine has no GPU, so torch is told it has one (a
    sitecustomize shim) only to get past the refusal: the first device call failed at once on
    ``set -u`` there (REHEARSE unbound), a path the CPU rehearsal never took."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(
        "import torch\ntorch.cuda.is_available = lambda: True\n"
        "torch.cuda.nccl.version = lambda: (0, 0, 0)\n")
    (tmp_path / "bundle").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("REHEARSE", "STAGES", "BUDGET_S")}
    r = subprocess.run(["bash", "evidence/gpu_device.sh", str(tmp_path / "bundle"),
                        str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, env={**env, "PYTHONPATH": f"{shim}:{ROOT}", "STAGES": "limit"})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "unbound variable" not in r.stderr
    assert "== limit" in r.stdout and (tmp_path / "out" / "limit.md").is_file()
    assert not (tmp_path / "out" / "REHEARSAL").exists()
