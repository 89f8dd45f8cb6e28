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


def stack_closure(roots: tuple[str, ...]) -> list:
    """The installed distributions ``roots`` need here (their requirements, transitively,
    extras and other platforms' markers left out), as importlib.metadata distributions."""
    import importlib.metadata as md

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: dict[str, md.Distribution] = {}
    todo = list(roots)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        dist = md.distribution(name)
        seen[name] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


def link_stack(venv_python: Path, roots: tuple[str, ...]) -> list[str]:
    """Give the venv of ``venv_python`` this Python's installed ``roots`` (e.g. torch and
    TensorFlow) and what they need, as pip would have installed the same wheels, by hard
    links: seconds instead of pip unpacking 2.4 GB again, and no download.

    Each distribution's files are linked by its RECORD into the venv's site-packages (its
    .dist-info included, so pip in the venv sees it installed); console scripts outside
    site-packages are not. A distribution the venv already has at the same version is kept;
    at another (the venv's older setuptools, which torch outgrew) it is uninstalled first, as
    pip would upgrade it. Safe for the originals: pip unlinks a file before it writes one, and
    Python writes bytecode to a new file it renames. Returns the names linked."""
    import shutil

    from packaging.utils import canonicalize_name

    site = Path(subprocess.run([str(venv_python), "-c", "import sysconfig; "
                                "print(sysconfig.get_path('purelib'))"], check=True,
                               capture_output=True, text=True).stdout.strip())
    have = {canonicalize_name(name): version for name, version in
            (p.name[:-len(".dist-info")].rsplit("-", 1) for p in site.glob("*.dist-info"))}
    linked = []
    for dist in stack_closure(roots):
        name = canonicalize_name(dist.metadata["Name"])
        if have.get(name) == dist.version:
            continue
        if name in have:
            subprocess.run([str(venv_python), "-m", "pip", "uninstall", "-y", "-q", name],
                           check=True, capture_output=True)
        for rel in dist.files or []:
            src = Path(dist.locate_file(rel))
            if ".." in rel.parts or not src.is_file():
                continue  # console scripts (bin/), files pip lists but never wrote
            dest = site / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, dest)
            except OSError:  # another file system: a copy, as pip would have made
                shutil.copy2(src, dest)
        linked.append(name)
    return linked
