"""launch/install.sh refuses bad preconditions with one clear line and a non-zero exit."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _install(python: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "launch/install.sh"], cwd=ROOT,
                          env={**os.environ, "PYTHON": python}, capture_output=True, text=True,
                          timeout=60)


def test_missing_python_is_named() -> None:
    r = _install("python3.99-missing")
    assert r.returncode == 1
    assert r.stderr.strip() == ("install: ERROR: no 'python3.99-missing' on PATH "
                                "(Python 3.11 is required)")


def test_wrong_python_version_is_named(tmp_path: Path) -> None:
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\necho 3.10\n")
    fake.chmod(0o755)
    r = _install(str(fake))
    assert r.returncode == 1
    assert r.stderr.strip().startswith("install: ERROR: Python 3.11 is required (found 3.10")
    assert len(r.stderr.strip().splitlines()) == 1
