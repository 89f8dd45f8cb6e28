"""Helpers of the tests that build an offline bundle and use it without network
(test_offline_bundle.py: this machine's stack; test_first_contact.py: a simulated target)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "launch" / "bundle_tool.py"
BUNDLE = ROOT / "launch" / "bundle.sh"


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without the checkout on PYTHONPATH or a venv in force, root's MPI on."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME") and not k.startswith("OMPI_")}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1", **extra)
    return env


def offline(script: str, timeout: int, cwd: Path,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``script`` in a new network namespace whose only interface is loopback."""
    return subprocess.run(["unshare", "-n", "sh", "-c", f"ip link set lo up && {script}"],
                          capture_output=True, text=True, timeout=timeout,
                          env=env or clean_env(), cwd=cwd)


def build_bundle(target_python: Path, tmp: Path, name: str) -> Path:
    """A bundle built here for ``target_python`` (probed first), Horovod's wheel from the cache
    ($HVDSCALE_CACHE/wheels) when one was built for the same Python, torch and TF before."""
    target = tmp / f"{name}.target.json"
    target.write_text(subprocess.run([str(target_python), str(TOOL), "probe"], check=True,
                                     capture_output=True, text=True).stdout)
    out = tmp / name
    r = subprocess.run(["bash", str(BUNDLE), "build", "--target", str(target), "--out", str(out)],
                       capture_output=True, text=True, timeout=2400, env=clean_env())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (out / "MANIFEST.json").is_file() and Path(f"{out}.tar.gz").is_file()
    return out
