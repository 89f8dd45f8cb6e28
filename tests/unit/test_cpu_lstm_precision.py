"""A reduced precision this CPU's fused LSTM lacks is refused in one line, before any step.

PyTorch hands a bf16 or fp16 ``nn.LSTM`` on an AVX-512 CPU to oneDNN, which has no such kernel
below its own ISA level; capping oneDNN at AVX2 (``ONEDNN_MAX_CPU_ISA``) makes this machine
such a CPU (seen on CI's: the run ended in a traceback at its first step).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AVX512 = "avx512bw" in Path("/proc/cpuinfo").read_text()


@pytest.mark.skipif(not AVX512, reason="PyTorch hands the LSTM to oneDNN on AVX-512 CPUs only")
def test_a_bf16_fused_lstm_that_onednn_refuses_is_one_line_and_exit_2(tmp_path: Path) -> None:
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2", OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "hvdscale", "run", str(ROOT / "configs/demo.yaml"),
                        "--set", "precision=bf16", "--set", "measure.steps=3",
                        "--out", str(tmp_path)], env=env, capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "hvdscale: error" in ln]
    assert len(lines) == 1 and "precision: bf16 with model.rnn_impl=fused on this CPU" in lines[0]
    assert "use precision=fp32, or model.rnn_impl=loop" in lines[0]


def test_the_probe_passes_fp32_and_a_loop_runs_anywhere() -> None:
    from hvdscale.frameworks.torch.precision import cpu_lstm_refusal

    assert cpu_lstm_refusal("fp32") is None and cpu_lstm_refusal("tf32") is None
