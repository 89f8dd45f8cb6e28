"""The offline bundle's manifest checks that no test tried (issue 39, launch/bundle_tool.py
check()): a Horovod built for another TensorFlow, and a file the manifest does not list, are
refused with one line; TensorFlow is compared only when the bundle's Horovod was built for it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

TOOL = Path(__file__).resolve().parents[2] / "launch" / "bundle_tool.py"
sys.path.insert(0, str(TOOL.parent))
import bundle_tool  # noqa: E402

HERE = bundle_tool.probe()


def _bundle(tmp: Path, frameworks: list[str], **target: Any) -> Path:
    folder = tmp / "b"
    folder.mkdir()
    (folder / "x-1.0-py3-none-any.whl").write_bytes(b"not really a wheel")
    bundle_tool.write_manifest(folder, {**HERE, **target}, {"frameworks": frameworks}, {})
    return folder


def test_a_horovod_built_for_another_tensorflow_is_refused(tmp_path: Path) -> None:
    folder = _bundle(tmp_path, ["torch", "tensorflow"], tensorflow="1.15.0")
    with pytest.raises(bundle_tool.BundleError, match=r"built for tensorflow 1\.15\.0"):
        bundle_tool.check(folder)


def test_tensorflow_is_compared_only_when_horovod_was_built_for_it(tmp_path: Path) -> None:
    bundle_tool.check(_bundle(tmp_path, ["torch"], tensorflow="1.15.0"))
    same = tmp_path / "same"
    same.mkdir()
    bundle_tool.check(_bundle(same, ["torch", "tensorflow"]))


def test_a_file_the_manifest_does_not_list_is_refused(tmp_path: Path) -> None:
    folder = _bundle(tmp_path, ["torch"])
    bundle_tool.check(folder)  # MANIFEST.json itself is no extra file
    (folder / "planted.so").write_bytes(b"\x7fELF")
    with pytest.raises(bundle_tool.BundleError,
                       match=r"holds files its manifest does not list: planted\.so$"):
        bundle_tool.check(folder)
    r = subprocess.run([sys.executable, str(TOOL), "check", str(folder)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "planted.so" in r.stderr and "Traceback" not in r.stderr
