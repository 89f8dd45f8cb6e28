"""Installing the Debian packages the SLURM and network-namespace tests need, once."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SBIN = Path("/usr/sbin")


def ensure_system_deps(*tools: str) -> None:
    """Install the SLURM/ssh packages once (launch/ci_system_deps.sh) or skip when we can't."""
    if all(shutil.which(t) or (SBIN / t).exists() for t in tools):
        return
    if os.geteuid() != 0:
        pytest.skip(f"needs root to install {', '.join(tools)} (launch/ci_system_deps.sh)")
    r = subprocess.run(["bash", str(ROOT / "launch/ci_system_deps.sh")], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
