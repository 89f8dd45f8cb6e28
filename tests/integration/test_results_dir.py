"""The results directory is checked before any training: unwritable or full fails at once."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from hvdscale.errors import HvdscaleError
from hvdscale.records.store import append_record, check_writable
from tests.records_fixture import run_record
from tests.tmpfs import mounted_tmpfs

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
       "TF_CPP_MIN_LOG_LEVEL": "2"}


@pytest.fixture
def tiny_fs(tmp_path: Path):
    """A real 256 KiB tmpfs (root only), unmounted afterwards."""
    yield from mounted_tmpfs(tmp_path / "tiny", "256k")


def test_nearly_full_disk_is_detected_and_earlier_records_survive(tiny_fs: Path) -> None:
    append_record(tiny_fs, run_record(name="earlier"))
    before = (tiny_fs / "results.jsonl").read_text()
    with pytest.raises(HvdscaleError, match="bytes free"):
        check_writable(tiny_fs)
    # A write that cannot fit fails without touching the old file.
    with pytest.raises(OSError):
        append_record(tiny_fs, run_record(name="x" * 400_000))
    assert (tiny_fs / "results.jsonl").read_text() == before
    assert [p.name for p in tiny_fs.iterdir() if p.name.endswith(".tmp")] == []


def test_run_with_unwritable_results_dir_fails_before_training(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    r = subprocess.run(["mpirun", "-np", "2", "hvdscale", "run", "configs/demo.yaml", "--out",
                        str(blocker / "results")], cwd=ROOT, env=ENV, capture_output=True,
                       text=True, timeout=90)
    assert r.returncode != 0
    assert r.stderr.count("is not writable") == 1, r.stderr
    assert "words/s" not in r.stdout


def test_full_disk_run_fails_before_training(tiny_fs: Path) -> None:
    (tiny_fs / "results.jsonl").write_text(json.dumps({"earlier": 1}) + "\n")
    r = subprocess.run(["hvdscale", "run", "configs/demo.yaml", "--out", str(tiny_fs)],
                       cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=90)
    assert r.returncode == 2 and "bytes free" in r.stderr
    assert (tiny_fs / "results.jsonl").read_text() == json.dumps({"earlier": 1}) + "\n"
