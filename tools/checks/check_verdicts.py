"""Verdicts need rounds (issue 50): README's figures recomputed from bench/results, and every
comparison sentence in README and BENCHMARKS.md ("A beats B", "faster than", "within X %")
checked to name at least 3 paired rounds, or to say it is no verdict. ``check_benchmarks.py``
runs both."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import readme_figures
from check_evidence import ROUNDS, _ok, validation_rows

from hvdscale.records.fields import Record

MIN_ROUNDS = 3
VERDICT = re.compile(r"\bwithin \d+(?:\.\d+)? ?%"
                     r"|\b(?:faster than|slower than|beats|outperforms?)\b", re.I)
"""The words of a comparison's verdict."""
ROUNDS_NAMED = re.compile(r"\bn ?= ?(\d+)\b|\b(\d+) (?:paired )?rounds?\b")
NOT_A_VERDICT = re.compile(r"no verdict|not a verdict|is no verdict", re.I)


def sentences(text: str) -> list[str]:
    """Prose sentences of a Markdown text, code blocks and table rows left out."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    prose = "\n".join(ln for ln in prose.splitlines()
                      if not ln.startswith(("|", "    ", "\t")))
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n\n", prose) if s.strip()]


def unsupported_verdicts(text: str) -> list[str]:
    """The sentences that state a verdict without naming 3 paired rounds (or saying they are
    no verdict): each a mismatch for check_benchmarks."""
    bad = []
    for s in sentences(text):
        if not VERDICT.search(s) or NOT_A_VERDICT.search(s):
            continue
        named = [int(a or b) for a, b in ROUNDS_NAMED.findall(s)]
        if not named or max(named) < MIN_ROUNDS:
            bad.append(" ".join(s.split())[:160])
    return bad


def readme_evidence(round1: list[Record], round2: list[Record]) -> list[str]:
    """README's 8-rank paragraph: the np = 8 words/s of round 1 and the fit's error ranges."""
    at8 = {r.strategy_name: r.words_per_s for r in _ok(round1) if r.workers == 8}
    rows = [r for r in validation_rows("demo", [_ok(round1), _ok(round2)], 4)
            if "error" not in r and r["round"] == 0 and r["n"] in (6, 8)]

    def span(strategy: str) -> str:
        errs = sorted(100 * (r["ratio"] - 1) for r in rows if r["strategy"] == strategy)
        return f"{errs[0]:+.1f} % to {errs[-1]:+.1f} %"

    ddp = (f"DDP {at8['ddp']:,.0f}" if "ddp" in at8 else
           "DDP's np = 8 point finished after the round's deadline and is left out")
    return [f"Horovod trained {at8['horovod']:,.0f} words/s and the parameter server "
            f"{at8['ps']:,.0f}", ddp, f"erred by {span('horovod')} for Horovod",
            f"by {span('ps')} for the parameter server"]


README_CHECKS = [
    ("README 8 ranks", ROUNDS, readme_evidence),
    ("README GPU", [readme_figures.SEEDS], readme_figures.gpu_seeds),
    ("README timings", [readme_figures.DEMO + f for f in (
        "install_first_time.txt", "warm_install_and_demo_times.txt")],
     readme_figures.install_and_demo),
    ("README demo sweep", [readme_figures.DEMO_PAIR], readme_figures.demo_pair),
    ("README make test", [readme_figures.CI_RUNS], readme_figures.make_test),
    ("README mutation slice", [readme_figures.MUTATION_CI], readme_figures.mutation_slice),
]
"""(section, raw files under bench/results, README's figures as it prints them)."""


def check_readme(text: str, raw: Callable[[str], Any]) -> tuple[int, list[str]]:
    """(figures and sentences checked, mismatches) of README: its figures recomputed (line
    breaks count as spaces), its verdicts held to ``MIN_ROUNDS``. ``raw(name)``: a raw file's
    contents, as check_benchmarks reads it."""
    flat = " ".join(text.split())
    n, bad = 0, []
    for section, raws, expect in README_CHECKS:
        for figure in expect(*[raw(r) for r in raws]):
            n += 1
            if " ".join(figure.split()) not in flat:
                bad.append(f"{section}: README.md does not show {figure!r} (recomputed from "
                           f"bench/results/{', '.join(raws)})")
    n_sentences, bad_verdicts = check_verdicts(text, "README")
    return n + n_sentences, bad + bad_verdicts


def check_verdicts(text: str, name: str) -> tuple[int, list[str]]:
    """(sentences read, mismatches) of a text whose verdicts are held to ``MIN_ROUNDS``
    (README's and BENCHMARKS.md's prose alike)."""
    return len(sentences(text)), [f"{name} verdict from fewer than {MIN_ROUNDS} paired rounds: "
                                  f"{s!r}" for s in unsupported_verdicts(text)]
