"""What a record needs to be reproduced: versions, MPI library, git revision."""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import subprocess
import sys
from pathlib import Path

import hvdscale


def _dist_version(*names: str) -> str | None:
    for name in names:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            continue
    return None


def mpi_library() -> str | None:
    """First line of the MPI library's version string, without initialising MPI."""
    try:
        import mpi4py

        if "mpi4py.MPI" not in sys.modules:
            # Only asking for a version: importing must not start an MPI job.
            mpi4py.rc.initialize = False
            mpi4py.rc.finalize = False
        from mpi4py import MPI

        return MPI.Get_library_version().strip().splitlines()[0].rstrip(",")
    except Exception:  # no MPI library at all: the record says so
        return None


def mpi_transports(env: dict[str, str] | None = None) -> str:
    """The Open MPI transport selections in force (``OMPI_MCA_btl``, ``_pml``, ``_mtl``, as
    ``btl=self,tcp``), or ``Open MPI's defaults`` when none is set."""
    env = dict(os.environ) if env is None else env
    picked = [f"{k[len('OMPI_MCA_'):]}={env[k]}" for k in sorted(env)
              if k in ("OMPI_MCA_btl", "OMPI_MCA_pml", "OMPI_MCA_mtl")]
    return ", ".join(picked) or "Open MPI's defaults"


def versions() -> dict[str, str | None]:
    """hvdscale, Python, torch, tensorflow, horovod, mpi4py, numpy and the MPI library.

    Read from package metadata, so tensorflow is never imported just to name its version.
    """
    return {
        "hvdscale": hvdscale.__version__,
        "python": platform.python_version(),
        "torch": _dist_version("torch"),
        "tensorflow": _dist_version("tensorflow-cpu", "tensorflow"),
        "horovod": _dist_version("horovod"),
        "mpi4py": _dist_version("mpi4py"),
        "numpy": _dist_version("numpy"),
        "mpi": mpi_library(),
    }


def git_revision(start: Path | None = None) -> str | None:
    """HEAD of the checkout holding the cwd (else hvdscale's own), '+dirty' if modified."""
    for where in (start or Path.cwd(), Path(__file__).resolve().parent):
        try:
            rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True,
                                 text=True, timeout=10)
            if rev.returncode != 0:
                continue
            dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                   cwd=where, capture_output=True, text=True, timeout=10)
            return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
        except (OSError, subprocess.TimeoutExpired):
            continue
    return None
