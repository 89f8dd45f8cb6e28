"""A real tmpfs of a given size for the tests that fill a disk (root only; skipped elsewhere)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def mounted_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """Mount a ``size`` tmpfs at ``where`` (made here), yield it, then unmount and remove it."""
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
        shutil.rmtree(where, ignore_errors=True)
