"""A stand-in ``mpirun`` on PATH for the sweep's unit tests: it appends the records the ranks
would write, from one template per (strategy, ranks) of a planned sweep, and logs each launch;
the script itself (per point, or per launch plan) is the test's."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from hvdscale.study.sweep.plan import SweepSpec
from tests.records_fixture import run_dict


def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: SweepSpec,
            script: str) -> Path:
    """Put ``script`` (formatted with ``python``, ``templates``, ``log`` and ``died``) on PATH
    as ``mpirun``, with a record template for every point of ``spec``; returns the launch log."""
    templates = {f"{p.strategy} {p.ranks}": run_dict(cfg=p.cfg, ranks=p.ranks, workers=p.ranks,
                                                     words_per_s=100.0 * p.ranks)
                 for p in spec.points}
    (tmp_path / "templates.json").write_text(json.dumps(templates))
    log = tmp_path / "launches.log"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "mpirun").write_text(script.format(
        python=sys.executable, templates=str(tmp_path / "templates.json"), log=str(log),
        died=str(tmp_path / "died")))
    (bindir / "mpirun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    (tmp_path / "out").mkdir()
    return log
