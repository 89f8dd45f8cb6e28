"""The exactness harness off the CPU: a device tensor compared with a host buffer (issue 38,
failure 6), and a GPU run whose every case of one strategy skipped (issue 39) failing loudly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.exactness import shares_host_memory

ROOT = Path(__file__).resolve().parents[2]


def test_shares_host_memory_takes_tensors_numpy_refuses() -> None:
    torch = pytest.importorskip("torch")
    host = torch.arange(6, dtype=torch.float32)
    assert shares_host_memory(host.numpy(), host)
    assert not shares_host_memory(host.numpy().copy(), host)
    # A tensor off the host ('meta' refuses .numpy() as a GPU's does: "can't convert meta
    # device type tensor to numpy") has no host memory: never shared, never an error.
    assert not shares_host_memory(host.numpy(), torch.zeros(6, device="meta"))
    grad = torch.zeros(6, requires_grad=True)  # .numpy() refuses: "requires grad"
    assert shares_host_memory(grad.detach().numpy(), grad)


CASES = """
import pytest
from tests.exactness_summary import note_strategy

def test_horovod_on_a_shared_gpu():
    note_strategy("horovod")
    pytest.skip("ranks 0 and 1 share one GPU")

def test_ps():
    note_strategy("ps")

@pytest.mark.skipif(True, reason="decided before training: not a case of any strategy")
def test_marked():
    note_strategy("ddp")
"""


def _run(tmp_path: Path, **env: str) -> tuple[int, str, dict]:
    (tmp_path / "test_cases.py").write_text(CASES)
    out = tmp_path / "summary.json"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                        "tests.exactness_summary", "--rootdir", str(tmp_path),
                        str(tmp_path / "test_cases.py")], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT),
                            "HVDSCALE_EXACTNESS_SUMMARY": str(out), **env})
    return r.returncode, r.stdout, json.loads(out.read_text())


def test_a_gpu_run_with_every_horovod_case_skipped_fails(tmp_path: Path) -> None:
    code, out, doc = _run(tmp_path, HVDSCALE_TEST_DEVICE="cuda")
    assert code == 1, out
    assert "exactness on cuda: horovod: 0 case(s) ran (0 passed, 0 failed), 1 skipped " \
           "(skipped: ranks 0 and 1 share one GPU)" in out
    assert "exactness on cuda: ps: 1 case(s) ran (1 passed, 0 failed), 0 skipped" in out
    assert "no case of horovod ran on the GPU" in out
    assert doc["strategies"]["horovod"]["ran"] == 0 and doc["strategies"]["ps"]["ran"] == 1
    assert doc["unrun"] == ["horovod"] and "ddp" not in doc["strategies"]
    # Accepted on a one-GPU machine when said so: still counted and printed, not failed.
    code, out, doc = _run(tmp_path, HVDSCALE_TEST_DEVICE="cuda",
                          HVDSCALE_EXACTNESS_ALLOW_UNRUN="horovod")
    assert code == 0 and "horovod: 0 case(s) ran" in out and doc["unrun"] == []
    code, out, _ = _run(tmp_path, HVDSCALE_TEST_DEVICE="cpu")  # CPU: reported, not failed
    assert code == 0 and "exactness on cpu: horovod: 0 case(s) ran" in out


def test_shares_host_memory_on_a_plain_array() -> None:
    torch = pytest.importorskip("torch")
    a = np.zeros(4, dtype=np.float32)
    assert shares_host_memory(a, torch.from_numpy(a))
