"""No start-up or device figure without its machine (issue 50); check_benchmarks runs it.

- A start-up raw file (``bench/bench_startup.py``'s, ``"bench": "startup"``) that BENCHMARKS.md
  or README names must say which MPI ran: the library's version line and the transports in
  force. Its ratios depend on both (0.88x against the floor with one MPI, 1.53x with another),
  so a file that does not say is refused, whatever its text around it says.
- A record measured on another machine (every records file under a folder holding a
  ``machine.json``, as the device evidence runs write them) must name its MPI library
  (``versions.mpi``) and carry the host's load; one measured on a GPU must name the GPU, in
  the record or in its run's ``machine.json``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hvdscale.records.batch import BatchRecord
from hvdscale.records.fields import Record
from hvdscale.records.gemm import GemmRecord
from hvdscale.records.profile import ProfileRecord
from hvdscale.records.reader import read
from hvdscale.records.run import RunRecord

NAMED = re.compile(r"bench/results/([\w./-]+\.json)\b")
"""A raw file as the text names it (start-up files are .json)."""


def startup_problems(name: str, d: Any) -> list[str]:
    """What a start-up raw file lacks (nothing for a file of another bench)."""
    if not isinstance(d, dict) or d.get("bench") != "startup":
        return []
    missing = [k for k in ("mpi_library", "mpi_transports") if not d.get(k)]
    if not all(isinstance(r.get("load"), int | float) for r in d.get("rounds", [])):
        missing.append("the load of every round")
    return [f"start-up raw file {name} does not name {', '.join(missing)}: its figures "
            "cannot be stated"] if missing else []


MEASURED = (RunRecord, GemmRecord, ProfileRecord, BatchRecord)
"""The kinds that hold a figure of their own (not a sweep's timing line, a failed point)."""


def _gpu(rec: RunRecord | GemmRecord | ProfileRecord | BatchRecord) -> tuple[bool, str | None]:
    """(it ran on a GPU, the GPU's model where the record names it)."""
    if isinstance(rec, RunRecord):
        gpu = rec.device.gpu
    elif isinstance(rec, ProfileRecord):
        gpu = rec.gpu
    else:  # a GEMM curve says only its device; a batch record none
        return isinstance(rec, GemmRecord) and rec.device == "cuda", None
    model = gpu.get("model") if isinstance(gpu, dict) else None
    return bool(gpu), str(model) if model else None


def record_problems(name: str, rec: Record, machine: dict[str, Any]) -> list[str]:
    """What one record measured on another machine lacks (``machine``: its machine.json)."""
    if not isinstance(rec, MEASURED):
        return []  # sweep timing lines, failed-point notes: no figure of their own
    what = f"{name}: {rec.kind if isinstance(rec, GemmRecord) else rec.name}"
    bad = []
    if not rec.versions.get("mpi"):
        bad.append(f"{what} does not name its MPI library (versions.mpi)")
    if not rec.loadavg:
        bad.append(f"{what} does not carry the host's load (loadavg)")
    on_gpu, model = _gpu(rec)
    if on_gpu and not (model or machine.get("gpu")):
        bad.append(f"{what} ran on a GPU and names none (record or machine.json)")
    return bad


def check_provenance(texts: list[str], results: Path) -> tuple[int, list[str]]:
    """(files and records checked, mismatches) of the start-up files ``texts`` name and of
    every record under a folder of ``results`` that has a machine.json."""
    n, bad = 0, []
    for name in sorted({m for t in texts for m in NAMED.findall(t)}):
        path = results / name
        if path.is_file():
            n += 1
            bad += startup_problems(name, json.loads(path.read_text()))
    for machine_file in sorted(results.glob("**/machine.json")):
        machine = json.loads(machine_file.read_text())
        for records in sorted(machine_file.parent.glob("**/*.jsonl")):
            for rec in read(records):
                n += 1
                bad += record_problems(str(records.relative_to(results)), rec, machine)
    return n, bad
