"""Fail when a figure in BENCHMARKS.md no longer matches its raw result in bench/results/.

Two kinds of check:

1. Generated blocks. Text between ``<!-- generated: python bench/<script>.py --render
   bench/results/<raw>.json -->`` (or a script of tools/mutation/) and ``<!-- end generated
   -->`` must equal, line for line, what that command prints now (it renders from the raw file
   alone).
2. Headline figures written by hand. Each check (check_sections.py: the development machine's
   sections; check_h100.py and check_evidence.py: the GPU machines') recomputes figures of one
   section from its raw file and formats them as the text prints them (same rounding), and the
   formatted string must appear in BENCHMARKS.md: a changed figure, or a raw file that no
   longer gives it, fails. A figure in a table is checked as its whole row, label first (and a
   table with one column per run is checked by one check reading every run), so figures
   swapped between rows or columns fail too. Load maxima and the quiet label are recomputed
   from the loads the raw file recorded against the project's threshold (``emit.quiet_label``,
   ``QUIET_LOAD``), never read from its stored summary or a threshold it stores; where a raw
   file holds every launch, medians and ratios are recomputed from the launches (issue 3's
   strategies table).

Besides BENCHMARKS.md: README's figures and every verdict's rounds (check_verdicts.py), and
start-up and device provenance (check_provenance.py).

    python tools/checks/check_benchmarks.py                 # CI: tests/run.sh phase "benchmarks"
    python tools/checks/check_benchmarks.py --md /tmp/B.md  # another copy of the text

Exit 0 when everything matches; 1 with one line per mismatch otherwise.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Also when this file is loaded by its path (the tests), not run: its checkers beside it, the
# benches' emit (the quiet label) in bench/, and in evidence/ the evidence report's own table
# functions, which check_evidence recomputes the evidence run's rows with.
for _folder in (ROOT / "evidence", ROOT / "bench", Path(__file__).resolve().parent):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))
from check_evidence import EVIDENCE_CHECKS  # noqa: E402  (issue 43's evidence run)
from check_h100 import H100_CHECKS  # noqa: E402  (issue 38's H100 section)
from check_provenance import check_provenance  # noqa: E402  (issue 50: MPI, load, GPU)
from check_sections import SECTION_CHECKS, FigureError  # noqa: E402  (issues 3 to 41)
from check_verdicts import check_readme, check_verdicts  # noqa: E402  (issue 50)

from hvdscale.records.store import RESULTS_FILE, load_records  # noqa: E402
from hvdscale.study.sweep.timing import unaccounted  # noqa: E402

GENERATED = re.compile(r"<!-- generated: (.+?) -->\n(.*?)<!-- end generated -->", re.S)
RENDER_CMD = re.compile(r"python (?:bench|tools/mutation)/\w+\.py --render "
                        r"bench/results/[\w.-]+\.json")
"""A generated block's command: a bench's (or the mutation harness's) render of a raw file."""

CHECKS: list[tuple[str, tuple[str, ...], Callable[..., list[str]]]] = [
    *SECTION_CHECKS,  # the development machine's sections (check_sections.py)
    *H100_CHECKS,  # issue 38: the first GPU machine's figures (check_h100.py)
    *EVIDENCE_CHECKS,  # issue 43: the evidence run's first loan (check_evidence.py)
]
"""(section, raw files in the results directory, the figures they give as the text prints
them: the check is called with each raw file's contents, in this order)."""


def _raw(path: Path) -> str | dict | list:
    """A raw file's contents: text (.md, .log), a list of records (.jsonl), else JSON. A
    sweep's records its sweep never accounted for (finished after a deadline cut it: not in its
    sweep_timing.jsonl) are left out, as ``hvdscale report`` leaves them out (issue 50)."""
    text = path.read_text()
    if path.suffix in (".md", ".log", ".txt"):
        return text
    if path.suffix == ".jsonl":
        if path.name == RESULTS_FILE:
            return [rec for _, rec in unaccounted(load_records(path))[0]]
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


def check_figures(text: str, results: Path) -> tuple[int, list[str]]:
    """(figures checked, mismatches) of the hand-written headline figures."""
    n, bad = 0, []
    for section, raws, expect in CHECKS:
        missing = [str(results / r) for r in raws if not (results / r).is_file()]
        if missing:
            bad.append(f"{section}: raw file {', '.join(missing)} is missing")
            continue
        data = [_raw(results / r) for r in raws]
        try:
            figures = expect(*data)
        except (FigureError, KeyError) as e:
            bad.append(f"{section}: nothing to check in bench/results/{', '.join(raws)}: "
                       f"{e.__class__.__name__} {e}")
            continue
        for figure in figures:
            n += 1
            if figure not in text:
                bad.append(f"{section}: BENCHMARKS.md does not show {figure!r} "
                           f"(recomputed from bench/results/{', '.join(raws)})")
    return n, bad


def check_generated(text: str) -> tuple[int, list[str]]:
    """(blocks checked, mismatches): each generated block against its command's output now."""
    n, bad = 0, []
    for cmd, body in GENERATED.findall(text):
        n += 1
        if not RENDER_CMD.fullmatch(cmd.strip()):
            bad.append(f"generated block: {cmd!r} is not 'python bench/<script>.py --render "
                       f"bench/results/<raw>.json' (or a tools/mutation/ script)")
            continue
        argv = [sys.executable, *shlex.split(cmd)[1:]]
        r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            bad.append(f"generated block: {cmd} failed: {r.stderr.strip()[-300:]}")
            continue
        want = [x.rstrip() for x in r.stdout.strip("\n").splitlines()]
        got = [x.rstrip() for x in body.strip("\n").splitlines()]
        if want != got:
            diff = next((i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b),
                        min(len(want), len(got)))
            bad.append(f"generated block: {cmd}: line {diff + 1} differs from the render "
                       f"(text {got[diff] if diff < len(got) else '<end>'!r}, render "
                       f"{want[diff] if diff < len(want) else '<end>'!r})")
    return n, bad


def main(argv: list[str] | None = None) -> int:
    """Check BENCHMARKS.md against bench/results/; print what differs; 0 when all match."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--md", default=str(ROOT / "bench" / "BENCHMARKS.md"))
    ap.add_argument("--results", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--readme", default=str(ROOT / "README.md"))
    args = ap.parse_args(argv)
    text, readme, results = Path(args.md).read_text(), Path(args.readme).read_text(), \
        Path(args.results)
    n_gen, bad_gen = check_generated(text)
    # Issue 50: README's figures, every verdict's rounds, start-up and device provenance.
    parts = [check_figures(text, results), check_readme(readme, lambda r: _raw(results / r)),
             check_verdicts(text, "BENCHMARKS.md"), check_provenance([text, readme], results)]
    n_fig, bad_fig = sum(n for n, _ in parts), [b for _, bad in parts for b in bad]
    for line in bad_fig + bad_gen:
        print(f"MISMATCH {line}")
    n_raw = sum(len(raws) for _, raws, _ in CHECKS)
    print(f"{n_fig} figures from {n_raw} raw results and {n_gen} generated blocks "
          f"checked: {len(bad_fig) + len(bad_gen)} mismatches")
    return 1 if bad_fig or bad_gen else 0


if __name__ == "__main__":
    sys.exit(main())

