"""Every published comparison checked by the one decision procedure (issues 50, 62): README's
figures recomputed from bench/results, and every comparative or superlative claim in README and
BENCHMARKS.md, prose and hand-written table cells alike, held to ``hvdscale.study.verdict``.

A sentence (or table row) with a claim word (``CLAIM``: faster, slower, fastest, ahead, beat,
gains, wins, loses, tuned, recommended, ships, within noise, no difference...) passes when

- it shows a ``CLAIMS`` entry's figure: the procedure run on the raw file the entry names, whose
  outcome must be the one the entry states (a claim the data no longer decide fails), or
- it says the comparison is undecided or no verdict (``NOT_A_VERDICT``), or
- every claim word in it is a reviewed use that compares no two measured series (``NOT_A_CLAIM``:
  "the slower rank", "the gain" of statistical efficiency, a GEMM timing's own rule...).

Anything else is a mismatch for check_benchmarks, such as "Horovod is the fastest strategy
here, well ahead of the parameter server." Generated blocks are left to check_generated: their
text is re-rendered from the raw file by code that calls the procedure. ``check_benchmarks.py``
runs all of this.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import readme_figures
import shaped_sweep_rows  # bench/ is on sys.path (check_benchmarks puts it there)
from check_evidence import ROUNDS, _ok, validation_rows

from hvdscale.records.fields import Record
from hvdscale.study.verdict import EQUIVALENT, FASTER, SLOWER, UNDECIDED, decide

CLAIM = re.compile(r"\b(?:faster|slower|fastest|slowest|ahead|beats?|beaten|"
                   r"outperforms?|gains?|gained|wins?|won|loses?|lost|tuned|recommended|"
                   r"recommends?|ships|shipped|within (?:the )?noise|no difference|"
                   r"worse)\b|\bwithin \d+(?:\.\d+)? ?%", re.I)
"""The words of a comparative or superlative claim."""
NOT_A_VERDICT = re.compile(r"\bundecided\b|no verdict|not a verdict|is no verdict|"
                           r"not decided|no setting is decided", re.I)
"""A sentence that says its comparison is not decided."""
NOT_A_CLAIM = [
    re.compile(r"\bslow(?:er|est) rank|slowest phases", re.I),  # which rank a step waits for
    re.compile(r"(?:the|of the|keeps? (?:its )?|keeping [\d.-]+ of the |lost the |lose )"
               r"gain\b|gain survived|\blose it\b|cannot gain from company|Keep the gain|"
               r"which-learning-rate-rule-keeps-the-gain", re.I),  # statistical efficiency
    re.compile(r"cannot beat the|cannot beat", re.I),  # a bound, no measured pair
    re.compile(r"slow down faster from n", re.I),  # public NCCL tables' shape (predict)
    re.compile(r"\b(?:multiples of 32 (?:faster|win)|a larger batch is slower|larger batch "
               r"ran more than 5 % slower|slower at a larger batch|slower than (?:the|their) "
               r"(?:same product|pre-transposed twin)|consistently slower|loses (?:up to|its "
               r"GPU)|\d+(?:\.\d+)? times slower than cuDNN|slower at tf 512|charged the "
               r"fastest fp32 GEMM)", re.I),  # GEMM timings: gemm_findings' own share rule
    re.compile(r"a setting is recommended only when|decides it faster|the recommended setting|"
               r"paired\.recommend`|"
               r"\"tuned\" is the|\"tuned\" adds|\"Tuned\" names|ships `overlap|This config "
               r"ships|Shipped defaults", re.I),  # what a word means here, no measured pair
    re.compile(r"point's lost\b|the gain was lost|its gains are as noisy", re.I),
    re.compile(r"made it worse \(measured before", re.I),  # withdrawn: no raw file kept
    re.compile(r"\|\s*within 10 %\s*\||goal: within 10 %", re.I),  # a fit's error, not a pair
    re.compile(r"compute 2-3x slower per word", re.I),  # one process's compute, not a pair
    re.compile(r"\bslower \(the allocator", re.I),
    # issue 63: the link with the highest set rate, and a prediction's error against its goal
    re.compile(r"fastest link|(?:are|land|every round) within 10 %", re.I),
]
"""Reviewed uses of a claim word that compare no two measured series (issue 62)."""


def sentences(text: str) -> list[str]:
    """Prose sentences and hand-written table rows of a Markdown text: code blocks, indented
    code and generated blocks left out."""
    body = re.sub(r"```.*?```", "", text, flags=re.S)
    body = re.sub(r"<!-- generated:.*?<!-- end generated -->", "", body, flags=re.S)
    rows = [ln for ln in body.splitlines() if ln.startswith("|") and not set(ln) <= set("|:- ")]
    prose = "\n".join(ln for ln in body.splitlines()
                      if not ln.startswith(("|", "    ", "\t")))
    return rows + [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n\n", prose) if s.strip()]


@dataclass(frozen=True)
class Claim:
    """A published comparison and the raw file that must decide it the way it says."""

    section: str
    raw: str
    ratios: Callable[[Any], list[float]]
    """The paired ratios A / B, one per round, from the raw file's contents."""
    outcome: str
    """What the text claims: ``FASTER``, ``SLOWER``, ``EQUIVALENT`` or ``UNDECIDED``."""
    template: str
    """The figure the text must show: ``{ratio}``, ``{lo}``, ``{hi}``, ``{n}``."""

    def figure(self, raw: Any) -> tuple[str, str]:
        """(the figure as the text prints it, the procedure's outcome) from the raw file."""
        v = decide(self.ratios(raw))
        fmt = {"ratio": v.ratio, "lo": v.lo, "hi": v.hi, "n": v.n}
        return self.template.format(**fmt), v.outcome


def _mode_ratio(mode: str, a: str, b: str) -> Callable[[Any], list[float]]:
    """A / B of bench_shared_launch's per-round points (``mode``: shared, alone)."""
    return lambda raw: [r[mode]["points"][a]["words_per_s"] / r[mode]["points"][b]["words_per_s"]
                        for r in raw["rounds"]]


def _runs_ratio(a: str, b: str, config: str | None = None) -> Callable[[Any], list[float]]:
    """A / B of a bench's per-variant runs, round by round (``config``: the key of a bench
    that runs several configs)."""
    def ratios(raw: Any) -> list[float]:
        runs = raw["runs"] if config is None else raw["configs"][config]["runs"]
        return [x["words_per_s"] / y["words_per_s"] for x, y in zip(runs[a], runs[b],
                                                                      strict=False)]
    return ratios


def _link_ratio(a: str, b: str, config: str, rate: float) -> Callable[[Any], list[float]]:
    """A / B of the shaped-link sweep's measured np=2 words/s at one rate, round by round, as
    its table pairs them (bench/shaped_sweep_rows.py)."""
    return lambda raw: shaped_sweep_rows.pair_ratios(raw, config, a, b, rate)


def _link_speedup(s: str, config: str, rate: float) -> Callable[[Any], list[float]]:
    """np=2 over np=1 words/s of strategy ``s`` on the shaped link at one rate, round by round
    (bench/shaped_sweep_rows.py)."""
    return lambda raw: shaped_sweep_rows.speedup_ratios(raw, config, s, rate)


def _wall_ratio(raw: Any) -> list[float]:
    return [r["alone"]["wall_s"] / r["shared"]["wall_s"] for r in raw["rounds"]]


CLAIMS = [
    Claim("ps / horovod at np=2", "precision_target_issue53.json",
          _mode_ratio("shared", "torch ps np=2 demo", "torch horovod np=2 demo"), UNDECIDED,
          "ps / horovod x{ratio:.3f} ({lo:.3f}-{hi:.3f}), {n} paired rounds: undecided"),
    Claim("demo sweep, shared launch", readme_figures.DEMO_PAIR, _wall_ratio, FASTER,
          "decided faster, x{ratio:.2f} ({lo:.2f}-{hi:.2f}), {n} paired runs"),
    Claim("horovod / mwms at np=2", "mwms.json", _runs_ratio("horovod", "mwms"), FASTER,
          "horovod / mwms x{ratio:.3f} ({lo:.3f}-{hi:.3f}), {n} paired rounds: Horovod decided "
          "faster"),
    Claim("horovod / ddp at np=2, demo", "ddp_demo.json",
          _runs_ratio("horovod", "ddp", "configs/demo.yaml"), UNDECIDED,
          "horovod / ddp x{ratio:.3f} ({lo:.3f}-{hi:.3f}), {n} paired rounds: undecided"),
    Claim("horovod tuned / ddp tuned at np=2, demo", "ddp_demo.json",
          _runs_ratio("horovod tuned", "ddp tuned", "configs/demo.yaml"), UNDECIDED,
          "horovod tuned / ddp tuned x{ratio:.3f} ({lo:.3f}-{hi:.3f}), {n} paired rounds: "
          "undecided"),
    Claim("ps2 / horovod on the 0.5 Gbit/s link, demo", "shaped_link.json",
          _link_ratio("ps2", "horovod", "configs/demo.yaml", 0.5), FASTER,
          "ps2 / horovod x{ratio:.3f} ({lo:.3f}-{hi:.3f}), {n} paired rounds: two servers "
          "decided faster"),
    Claim("ps / horovod on the 0.5 Gbit/s link, demo", "shaped_link.json",
          _link_ratio("ps", "horovod", "configs/demo.yaml", 0.5), SLOWER,
          "ps / horovod x{ratio:.3f} ({lo:.3f}-{hi:.3f}), {n} paired rounds: one server "
          "decided slower"),
    Claim("horovod np=2 / np=1 on the 1 Gbit/s link, demo", "shaped_link.json",
          _link_speedup("horovod", "configs/demo.yaml", 1.0), FASTER,
          "horovod np=2 / np=1 x{ratio:.3f} ({lo:.3f}-{hi:.3f}), {n} paired rounds: decided "
          "faster"),
    Claim("ps np=2 / np=1 on the 0.5 Gbit/s link, demo", "shaped_link.json",
          _link_speedup("ps", "configs/demo.yaml", 0.5), SLOWER,
          "ps np=2 / np=1 x{ratio:.3f} ({lo:.3f}-{hi:.3f}), {n} paired rounds: decided "
          "slower"),
]
"""The comparisons README and BENCHMARKS.md state, each with its raw file and outcome."""

OUTCOMES = {FASTER, SLOWER, EQUIVALENT, UNDECIDED}


def check_claims(text: str, raw: Callable[[str], Any],
                 claims: list[Claim] | None = None) -> tuple[list[str], list[str]]:
    """(the figures the text shows, mismatches): each claim's figure recomputed by the
    procedure, and its outcome held to what the text says."""
    shown, bad = [], []
    flat = " ".join(text.split())
    for c in CLAIMS if claims is None else claims:
        figure, outcome = c.figure(raw(c.raw))
        if figure not in flat:
            continue  # this text does not make the claim (README or BENCHMARKS.md, not both)
        shown.append(figure)
        if outcome != c.outcome:
            bad.append(f"{c.section}: the text says {c.outcome}, the procedure says {outcome} "
                       f"on bench/results/{c.raw}")
    return shown, bad


def unsupported_verdicts(text: str, supported: list[str] = ()) -> list[str]:
    """The sentences (and table rows) that make a comparative claim the procedure does not
    back: no claim figure (``supported``), no "undecided", and a claim word outside the
    reviewed non-claims."""
    bad = []
    for s in sentences(text):
        flat = " ".join(s.split())
        if not CLAIM.search(flat) or NOT_A_VERDICT.search(flat):
            continue
        if any(f in flat for f in supported):
            continue
        rest = flat
        for pattern in NOT_A_CLAIM:
            rest = pattern.sub(" ", rest)
        if CLAIM.search(rest):
            bad.append(flat[:160])
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
    n_sentences, bad_verdicts = check_verdicts(text, "README", raw)
    return n + n_sentences, bad + bad_verdicts


def check_verdicts(text: str, name: str,
                   raw: Callable[[str], Any] | None = None) -> tuple[int, list[str]]:
    """(sentences read, mismatches) of a text whose comparative claims are held to the
    decision procedure (README's and BENCHMARKS.md's alike); ``raw(name)`` reads a raw file
    for ``CLAIMS`` (None: from bench/results)."""
    shown, bad = check_claims(text, raw or _results_raw)
    return len(sentences(text)), bad + [
        f"{name} claim the decision procedure does not back (say it is undecided, or add a "
        f"check_verdicts.CLAIMS entry with its raw file): {s!r}"
        for s in unsupported_verdicts(text, shown)]


def _results_raw(name: str) -> Any:
    import json
    from pathlib import Path

    return json.loads((Path(__file__).resolve().parents[2] / "bench" / "results" / name)
                      .read_text())
