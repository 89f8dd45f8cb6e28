"""Issue 61's goals, measured: records and configs on msgspec against the hand-written walkers.

    python bench/bench_records.py --before 942efee --demo DIR --long DIR \
        --json bench/results/records_issue61.json
    python bench/bench_records.py --render bench/results/records_issue61.json

Four figures, before (the commit ``--before``, unpacked with ``git archive``) and after (this
checkout), each side in fresh processes of this Python, in paired rounds whose order alternates:

- lines of hvdscale/records and hvdscale/config;
- seconds to read every record under bench/results as it was at ``--before`` (both sides read
  that snapshot: the reader before refuses fields added since; ``hvdscale.records.read``; the
  median of 3 reads in one process, per round);
- seconds to ``import hvdscale.records, hvdscale.config`` in a fresh interpreter, and beside
  them ``import msgspec`` and ``import pydantic`` alone (what either library costs);
- bytes of a run record (a ``results.jsonl`` line) with its raw per-step lists and without
  them (what the record held before), for a demo run (``--demo``) and a 1,000-step run
  (``--long``).

The host's 1-minute load is recorded at every round (the development machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from emit import emit  # bench/ is on sys.path

import hvdscale.records as records
from hvdscale.records.store import RESULTS_FILE

ROOT = Path(__file__).resolve().parents[1]

PACKAGES = ("hvdscale/records", "hvdscale/config")
READ = ("import statistics, time, hvdscale.records as r\n"
        "def once():\n t = time.perf_counter(); r.read({res!r}); return time.perf_counter() - t\n"
        "print(statistics.median(once() for _ in range(3)))")
IMPORT = ("import time; t = time.perf_counter(); import {mods}; "
          "print(time.perf_counter() - t)")


def _lines(tree: Path) -> int:
    return sum(len(p.read_text().splitlines()) for pkg in PACKAGES
               for p in sorted((tree / pkg).glob("*.py")))


def _unpack(rev: str, into: Path) -> Path:
    """The package at ``rev`` (``git archive``), to import as the "before" side, with
    bench/results as it was then: what both sides read (the reader before refuses a field
    added since, by design, so a newer file would stop it)."""
    tar = into / "before.tar"
    subprocess.run(["git", "archive", "-o", str(tar), rev, "hvdscale", "bench/results"],
                   cwd=ROOT, check=True)
    with tarfile.open(tar) as t:
        t.extractall(into / "before", filter="data")
    return into / "before"


def _seconds(code: str, tree: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True, timeout=300, cwd=tree)
    return float(out.stdout.split()[-1])


def _pairs(code: str, before: Path, after: Path, rounds: int) -> dict[str, Any]:
    """Paired rounds of ``code`` run on each side; the side that goes first alternates."""
    b, a, loads = [], [], []
    for i in range(rounds):
        loads.append(os.getloadavg()[0])
        sides = [(before, b), (after, a)] if i % 2 == 0 else [(after, a), (before, b)]
        for tree, out in sides:
            out.append(_seconds(code, tree))
    return {"before_s": b, "after_s": a, "load_1min": loads}


def _sizes(results: Path) -> dict[str, int]:
    line = (results / RESULTS_FILE).read_text().splitlines()[-1]
    typed = records.read(results / RESULTS_FILE)[-1]
    rec = json.loads(line)  # the line as written: its size with and without the raw lists
    rec.pop("raw")
    before = json.dumps(rec, sort_keys=True, allow_nan=True) + "\n"  # as append_record writes
    return {"steps": typed.measure.steps, "ranks": typed.ranks,
            "before_bytes": len(before.encode()),
            "after_bytes": len(line.encode()) + 1}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every figure of the module's docstring."""
    with tempfile.TemporaryDirectory() as tmp:
        before = _unpack(args.before, Path(tmp))
        res = str(before / "bench" / "results")
        mods = "hvdscale.records, hvdscale.config"
        return {
            "bench": "records", "before": args.before, "python": sys.version.split()[0],
            "lines": {"before": _lines(before), "after": _lines(ROOT)},
            "read": _pairs(READ.format(res=res), before, ROOT, args.rounds),
            "read_at": args.before,
            "import": _pairs(IMPORT.format(mods=mods), before, ROOT, args.imports),
            "import_msgspec_s": [_seconds(IMPORT.format(mods="msgspec"), ROOT)
                                 for _ in range(args.imports)],
            "import_pydantic_s": [_seconds(IMPORT.format(mods="pydantic"), ROOT)
                                  for _ in range(args.imports)],
            "size": {"demo": _sizes(Path(args.demo)), "long": _sizes(Path(args.long))},
            "loadavg": list(os.getloadavg()),
        }


def _ms(xs: list[float]) -> str:
    return (f"{1e3 * statistics.median(xs):.1f} ms ({1e3 * min(xs):.1f} to "
            f"{1e3 * max(xs):.1f})")


def _read_what(r: dict[str, Any]) -> str:
    at = r.get("read_at")  # absent in the first raw file: it read this checkout's folder
    return ("every record under bench/results" if at is None else
            f"every record under bench/results as it was at {at}")


def render(r: dict[str, Any]) -> str:
    """The BENCHMARKS.md block, from the raw file alone."""
    rd, im = r["read"], r["import"]
    ratio = [a / b for a, b in zip(rd["after_s"], rd["before_s"], strict=True)]
    added = [a - b for a, b in zip(im["after_s"], im["before_s"], strict=True)]
    load = rd["load_1min"] + im["load_1min"]
    lines = [
        f"Before: {r['before']}; after: this issue's branch; Python {r['python']}; "
        f"1-minute load {min(load):.1f} to {max(load):.1f} (shared 2-core host: noisy).",
        "",
        "| figure | before | after | after vs before |",
        "|---|---|---|---|",
        f"| lines of hvdscale/records + hvdscale/config | {r['lines']['before']} | "
        f"{r['lines']['after']} | {r['lines']['after'] - r['lines']['before']:+d} lines |",
        f"| reading {_read_what(r)} ({len(ratio)} paired rounds) | "
        f"{_ms(rd['before_s'])} | {_ms(rd['after_s'])} | ratio "
        f"{statistics.median(ratio):.2f} ({min(ratio):.2f} to {max(ratio):.2f}) |",
        f"| `import hvdscale.records, hvdscale.config` ({len(added)} paired runs) | "
        f"{_ms(im['before_s'])} | {_ms(im['after_s'])} | "
        f"{1e3 * statistics.median(added):+.1f} ms ({1e3 * min(added):+.1f} to "
        f"{1e3 * max(added):+.1f}) |",
    ]
    for name, s in r["size"].items():
        lines.append(f"| a {name} run record ({s['steps']} steps, {s['ranks']} ranks), bytes | "
                     f"{s['before_bytes']} | {s['after_bytes']} | "
                     f"{s['after_bytes'] - s['before_bytes']:+d} bytes |")
    lines += ["", f"`import msgspec` alone: {_ms(r['import_msgspec_s'])}; `import pydantic` "
              f"alone: {_ms(r['import_pydantic_s'])} (fresh interpreters, "
              f"{len(r['import_msgspec_s'])} each)."]
    return "\n".join(lines) + "\n"


def main() -> int:
    """Measure and write the raw file, or render one."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--render", help="print the BENCHMARKS.md block of this raw file")
    p.add_argument("--before", default="942efee", help="the commit to compare with")
    p.add_argument("--demo", help="a results folder holding a demo run's record")
    p.add_argument("--long", help="a results folder holding a 1,000-step run's record")
    p.add_argument("--rounds", type=int, default=5, help="paired rounds of reading")
    p.add_argument("--imports", type=int, default=10, help="fresh imports per side")
    p.add_argument("--json", default="", help="write the raw result here")
    args = p.parse_args()
    if args.render:
        sys.stdout.write(render(json.loads(Path(args.render).read_text())))
        return 0
    result = emit(measure(args), args.json)
    sys.stdout.write(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
