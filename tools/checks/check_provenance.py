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

from hvdscale.records import schema

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


def _device(rec: dict[str, Any]) -> Any:
    return schema.device(rec) if "device" in rec else None  # a profile record has none


def _on_gpu(rec: dict[str, Any]) -> bool:
    dev = _device(rec)
    return dev == "cuda" or bool(isinstance(dev, dict) and dev.get("gpu")) or bool(rec.get("gpu"))


def _gpu_model(rec: dict[str, Any]) -> str | None:
    dev = _device(rec)
    for gpu in ((dev or {}).get("gpu") if isinstance(dev, dict) else None, rec.get("gpu")):
        if isinstance(gpu, dict) and gpu.get("model"):
            return str(gpu["model"])
    return None


def record_problems(name: str, rec: dict[str, Any], machine: dict[str, Any]) -> list[str]:
    """What one record measured on another machine lacks (``machine``: its machine.json)."""
    if "words_per_s" not in rec and schema.kind(rec) not in ("gemm", "profile", "batch"):
        return []  # sweep timing lines, failed-point notes: no figure of their own
    what = f"{name}: {schema.name(rec) if 'name' in rec else schema.kind(rec)}"
    bad = []
    if not (rec.get("versions") or {}).get("mpi"):
        bad.append(f"{what} does not name its MPI library (versions.mpi)")
    if not schema.loadavg(rec):
        bad.append(f"{what} does not carry the host's load (loadavg)")
    if _on_gpu(rec) and not (_gpu_model(rec) or machine.get("gpu")):
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
            for line in records.read_text().splitlines():
                rec = json.loads(line) if line.strip() else None
                if isinstance(rec, dict):
                    n += 1
                    bad += record_problems(str(records.relative_to(results)), rec, machine)
    return n, bad
