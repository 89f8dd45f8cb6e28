"""Which learning-rate rule (``optim.scale_lr``, with or without a warm-up) reached a quality
target first: the verdict of ``hvdscale report`` and of bench/bench_lr_rules.py.

Each rule's runs are paired round by round (``hvdscale sweep --repeats``: round r of every rule
ran before round r+1 of any), so a slow spell of the machine slows every rule of that round
alike. A run reaches the target or it does not; a diverged run (a NaN, or a held-out loss above
the initial weights', ``record.quality.diverged``) never reaches it, whatever its curve shows.

Ranking: the rule that reached the target in the most rounds, then the lowest median time to
target. Against the runner-up, the paired ratio (runner-up's time / the winner's) over the
rounds both reached is judged by the one decision procedure (``hvdscale.study.verdict``):
faster by x % with its 95 % interval, no difference larger than 2 %, or undecided.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hvdscale.records.experiment import plain, strategy_label
from hvdscale.records.fields import Record
from hvdscale.records.run import RunRecord
from hvdscale.study.paired.recommend import (
    MIN_VERDICT_ROUNDS,
    paired_ratios,
    ratio_summary,
    rounds_short,
    verdict_of,
    within_noise,
)
from hvdscale.study.paired.rounds import by_round, round_of
from hvdscale.study.quality.time_to_quality import id_without, reached_at, source_name


@dataclass(frozen=True)
class Outcome:
    """One run against its target."""

    time_s: float | None
    """Training time to the target (interpolated between evaluations); None: not reached."""
    steps: float | None
    """Updates to the target (warm-up included); None: not reached."""
    diverged: bool = False

    @property
    def reached(self) -> bool:
        """Whether the run met the target (a diverged run never does)."""
        return self.time_s is not None and not self.diverged


def rule_label(optim: Mapping[str, Any]) -> str:
    """A record's rule as a table shows it: ``linear``, ``linear+warmup50``, ``legw50``.

    ``optim`` is the run's configured ``optim`` section; its warm-up is named only where it
    ramps (a rule that scales the rate, or a start rate of its own), as the identity does.
    """
    rule = optim.get("scale_lr", "none")
    steps = int(optim.get("warmup_steps") or 0)
    ramps = steps > 0 and (rule != "none" or optim.get("warmup_start_lr") is not None)
    if rule == "legw":
        return f"legw{steps}"
    return f"{rule}+warmup{steps}" if ramps else rule


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def rule_stats(rounds: Sequence[Outcome | None]) -> dict[str, Any]:
    """Per rule: runs, reached, diverged, and the median / range of time and steps to target."""
    runs = [o for o in rounds if o is not None]
    hit = [o for o in runs if o.reached]
    times = [o.time_s for o in hit if o.time_s is not None]
    steps = [o.steps for o in hit if o.steps is not None]
    return {"runs": len(runs), "reached": len(hit), "diverged": sum(o.diverged for o in runs),
            "time_median": _median(times), "time_min": min(times, default=None),
            "time_max": max(times, default=None), "steps_median": _median(steps),
            "steps_min": min(steps, default=None), "steps_max": max(steps, default=None)}


def _rank_key(stats: Mapping[str, Any]) -> tuple[float, float]:
    med = stats["time_median"]
    return (-stats["reached"], med if med is not None else float("inf"))


def _times(rounds: Sequence[Outcome | None]) -> list[float | None]:
    return [o.time_s if o is not None and o.reached else None for o in rounds]


def rule_verdict(rules: Mapping[str, Sequence[Outcome | None]]) -> dict[str, Any]:
    """The rule that reached the target first, and by how much, round by round.

    Args:
        rules: per rule label, its outcome in round 0, 1, ... (None: that round's launch
            failed or did not run).

    Returns:
        ``stats`` (label -> ``rule_stats``), ``winner`` and ``runner_up`` (labels or None),
        ``ratio`` (``ratio_summary`` of the runner-up's time over the winner's in the rounds
        both reached, or None), ``missed`` (rounds the winner reached and the runner-up did
        not), ``within_noise`` and ``verdict`` (one sentence).
    """
    stats = {label: rule_stats(r) for label, r in rules.items()}
    order = sorted(stats, key=lambda label: _rank_key(stats[label]))
    out: dict[str, Any] = {"stats": stats, "winner": None, "runner_up": None, "ratio": None,
                           "missed": 0, "within_noise": False}
    if not order or stats[order[0]]["reached"] == 0:
        out["verdict"] = "no rule reached the target"
        return out
    win = order[0]
    out["winner"] = win
    if len(order) == 1:
        out["verdict"] = f"{win} reached the target (the only rule measured)"
        return out
    run = order[1]
    out["runner_up"] = run
    a, b = rules[win], rules[run]
    out["missed"] = sum(1 for x, y in zip(a, b, strict=False)
                        if x is not None and x.reached and y is not None and not y.reached)
    s = ratio_summary(paired_ratios(_times(b), _times(a)))
    out["ratio"] = s
    both = sum(1 for x, y in zip(a, b, strict=False) if x is not None and y is not None)
    out["verdict"] = _sentence(win, run, stats, s, out["missed"], both)
    out["within_noise"] = bool(s is not None and not out["missed"] and within_noise(s))
    return out


def _sentence(win: str, run: str, stats: Mapping[str, Any], s: dict[str, Any] | None,
              missed: int, both: int) -> str:
    """The verdict in words: the procedure's on the paired times (decided or not); below
    ``MIN_VERDICT_ROUNDS`` rounds run by both (``both``), no verdict (``missed``: the rounds
    the runner-up missed and the winner reached)."""
    w, r = stats[win], stats[run]
    reach = f"{win} reached the target in {w['reached']} of {w['runs']} rounds"
    if missed:
        short = f"; {rounds_short(both)}" if both < MIN_VERDICT_ROUNDS else ""
        return (f"{reach}, {run} in {r['reached']} of {r['runs']}: {win} first "
                f"({run} missed the target in {missed} round(s) {win} reached){short}")
    if s is None:
        return f"{reach}; {run} shares no round with it: no paired ratio"
    spread = f"x{s['median']:.2f}, rounds {s['min']:.2f}-{s['max']:.2f}, n={s['n']}"
    if s["n"] < MIN_VERDICT_ROUNDS:
        return f"{reach}; {win} ahead of {run} by its median ({spread}): {rounds_short(s['n'])}"
    # The ratio is the runner-up's time over the winner's: "faster" means the winner's.
    return f"{reach}; time to target: {verdict_of(s).words(win, run)}"


# --- the report's section --------------------------------------------------------------------

_RULE_KEYS = ("scale_lr", "warmup_steps", "warmup_start_lr")
"""The ``optim`` settings a rule comparison varies: left out of its grouping."""


def record_outcome(rec: RunRecord) -> Outcome:
    """A record against its own target (``hvdscale.study.quality.time_to_quality``'s crossing; a
    diverged run or one whose verdict is ``reached: false`` never reaches it)."""
    q = rec.quality_or_empty
    hit = None if q.get("diverged") else reached_at(rec)
    if hit is None:
        return Outcome(None, None, bool(q.get("diverged")))
    return Outcome(hit["train_s"], hit.get("updates", hit["step"]))


def _rule_group(rec: RunRecord) -> tuple:
    """The experiment and strategy without the rule: the runs a rule comparison pairs."""
    c = plain(rec.config)
    return (c["model"]["kind"], source_name(c), c["framework"], strategy_label(c),
            c["optim"]["name"], id_without(c, "optim", _RULE_KEYS))


def _weak_runs(records: Sequence[Record]) -> dict[tuple, dict[str, list[RunRecord]]]:
    """(group, ranks) -> rule label -> its ok weak-scaling records, oldest first."""
    out: dict[tuple, dict[str, list[RunRecord]]] = {}
    for r in records:
        if not isinstance(r, RunRecord) or not r.quality_or_empty.get("until") or r.ranks < 2 \
                or r.config.data.scaling != "weak":
            continue
        key = (_rule_group(r), r.ranks)
        out.setdefault(key, {}).setdefault(rule_label(plain(r.config.optim)), []).append(r)
    return out


def _cell(stats: Mapping[str, Any], what: str, spec: str) -> str:
    med = stats[f"{what}_median"]
    if med is None:
        return "-"
    lo, hi = stats[f"{what}_min"], stats[f"{what}_max"]
    return format(med, spec) + ("" if lo == hi else f" ({format(lo, spec)}-{format(hi, spec)})")


def rules_section(records: Sequence[Record]) -> str:
    """Markdown: per experiment, strategy and rank count holding more than one rule, each
    rule's runs against the target, and which rule reached it first (paired by round)."""
    groups = {k: v for k, v in _weak_runs(records).items() if len(v) > 1}
    if not groups:
        return ""
    lines = ["## Learning-rate rules under weak scaling\n",
             "Runs of one experiment that differ only in `optim.scale_lr` and its warm-up, "
             "paired by round (`hvdscale sweep --repeats`); time to target as in *Time to "
             "quality*; a diverged run (NaN, or a held-out loss above the initial weights') "
             "never reaches the target. First: most rounds reached, then the lowest median "
             "time; the paired ratio is the runner-up's time over the winner's.\n"]
    for (group, ranks) in sorted(groups, key=repr):
        rules = groups[group, ranks]
        repeats = max([1 + (round_of(r) or 0) for rs in rules.values() for r in rs]
                      + [len(rs) for rs in rules.values()])
        per_rule = {label: [None if r is None else record_outcome(r)
                            for r in by_round(rs, repeats)] for label, rs in rules.items()}
        v = rule_verdict(per_rule)
        kind, source, fw, strategy, optim = group[:5]
        lines += [f"\n### {kind} on {source}, {fw}, {strategy}, {optim}: np={ranks} "
                  f"(experiment {group[5]})\n",
                  "| rule | reached | diverged | time to target (s) | steps to target |",
                  "|--|--|--|--|--|"]
        for label in sorted(v["stats"], key=lambda x: (x != v["winner"], x)):
            st = v["stats"][label]
            lines.append(f"| {label} | {st['reached']} of {st['runs']} | {st['diverged']} | "
                         f"{_cell(st, 'time', '.1f')} | {_cell(st, 'steps', '.0f')} |")
        lines.append(f"\n**First to the target at np={ranks}**: {v['verdict']}.")
    return "\n".join(lines) + "\n"
