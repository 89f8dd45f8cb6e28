"""The single-GPU "how close to the limit" table and the prepared GPU script's refusal on a
machine without a GPU (issue 31)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from hvdscale.config import load_config, to_dict
from hvdscale.study.gpu_limit import gemm_tflops, limit_rows, main
from hvdscale.study.step_flops import flops_per_word

ROOT = Path(__file__).resolve().parents[2]


def _run(impl: str, words_per_s: float) -> dict:
    cfg = to_dict(load_config("configs/nmt_torch.yaml", [f"model.rnn_impl={impl}", "tf32=off"]))
    return {"status": "ok", "config": cfg, "words_per_s": words_per_s, "ranks": 1, "workers": 1,
            "device": {"gpu": {"model": "NVIDIA H100"}}}


def _gemm(gflops_at: dict[int, float]) -> dict:
    rows = [{"hidden": 512, "variant": "NN", "batch": b, "gflops": g} for b, g in gflops_at.items()]
    return {"kind": "gemm", "status": "ok", "frameworks": [{"precision": "fp32", "rows": rows}]}


def test_fraction_is_useful_over_gemm_tflops_at_the_nearest_batch() -> None:
    gemm = _gemm({256: 20000.0, 512: 40000.0})
    assert gemm_tflops(gemm, 512, 300, "fp32") == 20.0  # the nearest measured batch
    assert gemm_tflops(gemm, 512, 500, "fp32") == 40.0
    assert gemm_tflops(gemm, 512, 500, "tf32") is None
    run = _run("fused", 50000.0)
    (row,) = limit_rows([run], gemm)
    useful = 50000.0 * flops_per_word(run["config"]["model"])["total"] / 1e12
    assert row["useful_tflops"] == pytest.approx(useful)
    assert row["fraction"] == pytest.approx(useful / 20.0)


def test_main_reads_a_results_folder(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "seeds").mkdir()
    (tmp_path / "gemm").mkdir()
    (tmp_path / "seeds" / "results.jsonl").write_text(
        json.dumps(_run("loop", 40000.0)) + "\n")
    (tmp_path / "gemm" / "results.jsonl").write_text(json.dumps(_gemm({384: 30000.0})) + "\n")
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "|NVIDIA H100|loop|off|40,000|43,398 / 39,369|" in out
    assert main([str(tmp_path / "missing")]) == 2


def test_gpu_script_refuses_without_a_gpu_in_one_line(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    r = subprocess.run(["bash", "bench/gpu_device.sh", str(tmp_path / "bundle"),
                        str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]
    assert r.stderr.startswith("gpu_device: ERROR: no GPU visible to torch")
    assert not (tmp_path / "out").exists()  # nothing installed or written
