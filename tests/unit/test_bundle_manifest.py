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
    folder.mkdir(parents=True)
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


# --- each refusal's line, whole: it is all the user gets (issue 39, mutation survivors) ------

def _refused(folder: Path) -> str:
    with pytest.raises(bundle_tool.BundleError) as e:
        bundle_tool.check(folder)
    return str(e.value)


def _refused_without_site(folder: Path) -> str:
    """The refusal a real Python without torch and TensorFlow gives: this one, without its
    site-packages (``-S``), through the command line the launchers use."""
    r = subprocess.run([sys.executable, "-S", str(TOOL), "check", str(folder)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.startswith("bundle: ERROR: "), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    return r.stderr.strip().removeprefix("bundle: ERROR: ")


def test_not_a_bundle_or_an_unreadable_manifest(tmp_path: Path) -> None:
    assert _refused(tmp_path) == (f"{tmp_path} has no MANIFEST.json: not a bundle made by "
                                  "launch/bundle.sh")
    (tmp_path / "MANIFEST.json").write_text('{"files": []}')
    assert _refused(tmp_path) == (f"{tmp_path / 'MANIFEST.json'} is not a readable bundle "
                                  "manifest ('target')")


def test_another_python_torch_or_tensorflow_is_named_with_what_is_here(tmp_path: Path) -> None:
    py = _bundle(tmp_path / "py", ["torch"], python="3.12", python_tag="cp312")
    assert _refused(py) == (f"bundle is for Python 3.12 (cp312), this is Python "
                            f"{HERE['python']} ({sys.executable})")
    torch = _bundle(tmp_path / "torch", ["torch"], torch="2.11.0+cu130")
    assert _refused(torch) == (f"bundle's Horovod is built for torch 2.11.0+cu130, this Python "
                               f"has torch {HERE['torch']}; Horovod built for another torch "
                               "fails with 'undefined symbol'")
    tf = _bundle(tmp_path / "tf", ["torch", "tensorflow"], tensorflow="1.15.0")
    assert _refused(tf) == ("bundle's Horovod is built for tensorflow 1.15.0, this Python has "
                            f"{HERE['tensorflow']}")


def test_a_python_without_torch_or_tensorflow_says_so(tmp_path: Path) -> None:
    assert HERE["torch"] and HERE["tensorflow"]  # else the bundles below fit this Python
    torch = _bundle(tmp_path / "torch", ["torch"])
    assert _refused_without_site(torch) == (
        f"bundle's Horovod is built for torch {HERE['torch']}, this Python has torch not "
        "installed; Horovod built for another torch fails with 'undefined symbol'")
    tf = _bundle(tmp_path / "tf", ["tensorflow"], torch=None)
    assert _refused_without_site(tf) == (
        f"bundle's Horovod is built for tensorflow {HERE['tensorflow']}, this Python has none")


def test_a_missing_damaged_or_unlisted_file_is_named(tmp_path: Path) -> None:
    folder = _bundle(tmp_path, ["torch"])
    for name in ("b.so", "a.so"):
        (folder / name).write_bytes(b"\x7fELF")
    assert _refused(folder) == f"{folder} holds files its manifest does not list: a.so, b.so"
    for name in ("b.so", "a.so"):
        (folder / name).unlink()
    wheel = folder / "x-1.0-py3-none-any.whl"
    wheel.write_bytes(b"changed on the way")
    assert _refused(folder) == (f"{wheel} does not match its sha256 in the manifest "
                                "(damaged copy?)")
    wheel.unlink()
    assert _refused(folder) == f"{wheel} is missing (listed in the manifest)"
