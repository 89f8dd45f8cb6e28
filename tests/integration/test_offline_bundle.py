"""The offline bundle (launch/bundle.sh, issue 30) for real.

The slow test builds bundle (a), this machine's stack, with the Horovod wheel from the cache
($HVDSCALE_CACHE/wheels: built once, about 5-7 minutes on 2 cores, then seconds), installs it into a
fresh venv with nothing but loopback up (``unshare -n``), and runs an np=2 Horovod run with
the bundle's own mpirun. The venv sees the system's torch and TensorFlow
(--system-site-packages) and so also the system's Horovod, mpi4py and Debian's Open MPI 4.1:
the test proves that the run used the bundle's Horovod, mpirun and libmpi (Open MPI 5) instead.

The fast tests check the manifest's refusals on a hand-made bundle.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.offline_target import BUNDLE, ROOT, TOOL, build_bundle, offline
from tests.integration.system_deps import ensure_system_deps

BASE_PYTHON = getattr(sys, "_base_executable", sys.executable)


@pytest.fixture(scope="module")
def offline_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """Bundle (a) built from the cached Horovod wheel and installed offline into a fresh venv."""
    if os.geteuid() != 0:
        pytest.skip("needs root for unshare -n")
    ensure_system_deps("ip", "unshare")
    tmp = tmp_path_factory.mktemp("bundle")
    venv = tmp / "venv"
    subprocess.run([BASE_PYTHON, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = venv / "bin" / "python"
    out = build_bundle(py, tmp, "bundle-a")
    # cwd outside the checkout, so that nothing imports the checkout's hvdscale by accident.
    r = offline(f"PYTHON={py} bash {BUNDLE} install {out}", 900, tmp)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "allreduce ok: 1 + 2 = 3 on 2 ranks" in r.stderr, r.stderr
    yield venv, out


@pytest.mark.slow
def test_offline_np2_run_uses_the_bundles_mpi_and_horovod(offline_venv: tuple[Path, Path],
                                                           tmp_path: Path) -> None:
    venv, bundle = offline_venv
    manifest = json.loads((bundle / "MANIFEST.json").read_text())
    assert manifest["mpi"]["version"].startswith("5.0.") and not manifest["mpi"]["cuda_aware"]
    out = tmp_path / "results"
    where = ("import horovod, hvdscale, mpi4py; "
             "print(horovod.__file__, hvdscale.__file__, mpi4py.__file__)")
    run = (f"export PATH={venv}/bin:$PATH && command -v mpirun && mpirun --version | head -1 && "
           f"{venv}/bin/python -c '{where}' && "
           f"mpirun -np 2 hvdscale run {ROOT}/configs/demo.yaml --set measure.warmup_steps=2 "
           f"--set measure.steps=4 --set data.synthetic.sentences_per_rank=128 --out {out}")
    r = offline(run, 600, tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert lines[0] == f"{venv}/bin/mpirun"  # not Debian's /usr/bin/mpirun
    assert "(Open MPI) 5.0." in lines[1]
    assert all(p.startswith(str(venv)) for p in lines[2].split()), lines[2]
    (rec,) = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert rec["status"] == "ok" and rec["workers"] == 2 and rec["horovod_used"]
    # The library the ranks loaded: Open MPI 5 (the bundle's), not Debian's 4.1.
    assert "Open MPI v5.0." in rec["versions"]["mpi"], rec["versions"]["mpi"]


# --- the manifest's refusals, on a hand-made bundle (fast) --------------------------------------

def _fake_bundle(tmp: Path, **target: str) -> Path:
    sys.path.insert(0, str(TOOL.parent))
    try:
        import bundle_tool
    finally:
        sys.path.remove(str(TOOL.parent))
    folder = tmp / "b"
    folder.mkdir()
    (folder / "x-1.0-py3-none-any.whl").write_bytes(b"not really a wheel")
    here = bundle_tool.probe()
    bundle_tool.write_manifest(folder, {**here, **target}, {"frameworks": ["torch"]}, {})
    return folder


def _check(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), "check", str(folder)], capture_output=True,
                          text=True, timeout=60)


def test_manifest_accepts_a_bundle_made_for_this_python(tmp_path: Path) -> None:
    r = _check(_fake_bundle(tmp_path))
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(("target", "says"), [
    ({"python_tag": "cp312", "python": "3.12"}, "bundle is for Python 3.12 (cp312)"),
    ({"torch": "2.11.0+cu130"}, "built for torch 2.11.0+cu130"),
])
def test_manifest_refuses_another_python_or_torch(tmp_path: Path, target: dict,
                                                  says: str) -> None:
    r = _check(_fake_bundle(tmp_path, **target))
    assert r.returncode == 2 and says in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_manifest_refuses_a_damaged_or_incomplete_bundle(tmp_path: Path) -> None:
    folder = _fake_bundle(tmp_path)
    (folder / "x-1.0-py3-none-any.whl").write_bytes(b"changed on the way")
    r = _check(folder)
    assert r.returncode == 2 and "does not match its sha256" in r.stderr, r.stderr
    (folder / "x-1.0-py3-none-any.whl").unlink()
    r = _check(folder)
    assert r.returncode == 2 and "is missing" in r.stderr, r.stderr


def test_the_bundle_carries_what_its_wheels_require_and_the_target_lacks(tmp_path: Path) -> None:
    """Horovod's wheel requires cffi at install: a target without it (the GPU machine's image)
    could not install a bundle that did not carry it (issue 38, failure 1)."""
    import zipfile

    wheel = tmp_path / "horovod-0.28.1-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("horovod-0.28.1.dist-info/METADATA", "Name: horovod\n"
                   "Requires-Dist: cloudpickle\nRequires-Dist: cffi>=1.4.0\n"
                   'Requires-Dist: dataclasses; python_version < "3.7"\n'
                   'Requires-Dist: torch; extra == "pytorch"\nRequires-Dist: PyYAML\n')
    target = tmp_path / "target.json"
    target.write_text(json.dumps({"installed": {"cloudpickle": "3.1", "pyyaml": "6.0"}}))
    r = subprocess.run([sys.executable, str(TOOL), "lacking", str(target), "numpy",
                        "horovod", "--wheels", str(wheel)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["numpy", "cffi>=1.4.0"]


def test_the_bundle_carries_msgspec_to_a_target_without_it(tmp_path: Path) -> None:
    """The record kinds and the config reader need msgspec (issue 61): it is one of the
    bundle's runtime dependencies and of hvdscale's own, so a target that lacks it gets it."""
    import re
    import shlex

    deps = shlex.split(re.search(r"^RUNTIME_DEPS=\((.*)\)$", BUNDLE.read_text(), re.M)[1])
    assert "msgspec>=0.19" in deps
    assert "msgspec>=0.19" in (ROOT / "setup.cfg").read_text()
    target = tmp_path / "target.json"
    target.write_text(json.dumps({"installed": {"numpy": "2.0", "pyyaml": "6.0"}}))
    r = subprocess.run([sys.executable, str(TOOL), "lacking", str(target), *deps],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "msgspec>=0.19" in r.stdout.split()
