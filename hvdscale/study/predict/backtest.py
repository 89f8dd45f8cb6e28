"""The back-test: on each public table, fit on n <= 4 GPUs and predict the rest.

Per table the step time per batch is fitted as t(n) = t0 + family(n) (``fit.choose`` over the
table's strategy's families in ``families.family_names``, the same procedure for every
table, no per-table choice by hand); predicted words/s at n is n x (words per GPU per step, the
mean over the fitted points) / t(n), with a 95 % prediction interval (Student t on the fit's
degrees of freedom; the parameters' uncertainty plus one new point's residual scatter). The
result counts how many held-out points fall inside it (``interval_coverage``).

A table may hold any distinct GPU counts with a 1-GPU row (``tables.read_table``). Where fewer
than ``fit.MIN_TO_CHOOSE`` of them lie at or below the fit's limit (1, 4 of a 1, 4, 8, 16
table), no family can be chosen: the strategy's first family that fits is shown, and the table
carries a ``note`` saying so (in the JSON and the printed output).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from hvdscale.errors import HvdscaleError
from hvdscale.study.plotting import figure
from hvdscale.study.predict.families import families_for, family_names
from hvdscale.study.predict.fit import MIN_TO_CHOOSE, Choice, choose
from hvdscale.study.predict.tables import Table, load_tables

FIT_MAX = 4
GOAL_PCT = 10.0
STRETCH_PCT = 5.0


def _interval(n: int, words: float, t: float, hw: float) -> tuple[float | None, float | None]:
    """words/s interval from the step time's +- ``hw`` (None where unknown or unbounded)."""
    if not math.isfinite(hw):
        return None, None
    hi_t, lo_t = t + hw, t - hw
    return n * words / hi_t, (n * words / lo_t if lo_t > 0 else None)


def _not_chosen_note(table: Table, fit_n: list[int], fit_max: int, choice: Choice
                     ) -> str | None:
    """Why the family was not chosen by the points, where there are too few of them."""
    if len(fit_n) >= MIN_TO_CHOOSE:
        return None
    return (f"{table.name}: only {len(fit_n)} GPU counts at n <= {fit_max} "
            f"({', '.join(map(str, fit_n))}), too few to choose among the {table.strategy} "
            f"families ({', '.join(family_names(table.strategy))}): shown is the first that "
            f"fits, {choice.fit.family.name}, not a choice the table supports; a family needs "
            f"{MIN_TO_CHOOSE} GPU counts at or below --fit-max")


def backtest_table(table: Table, fit_max: int = FIT_MAX) -> dict[str, Any]:
    """Fit ``table`` on n <= ``fit_max``, predict every larger n; the entry for the JSON."""
    fit_n = [n for n in table.gpus if n <= fit_max]
    idx = [table.gpus.index(n) for n in fit_n]
    choice = choose(families_for(table.strategy), fit_n, [table.step_s[i] for i in idx])
    words = float(np.mean([table.words_per_rank_step(n) for n in fit_n]))
    rows = []
    for i, n in enumerate(table.gpus):
        if n <= fit_max:
            continue
        t = choice.fit.predict(n)[0]
        pred = n * words / t
        lo, hi = _interval(n, words, t, choice.fit.half_width(n))
        meas = table.words_per_s[i]
        rows.append({"table": table.name, "n": n, "measured_words_per_s": meas,
                     "predicted_words_per_s": pred, "interval_words_per_s": [lo, hi],
                     "inside_interval": lo is not None and lo <= meas <= (hi or math.inf),
                     "error_pct": 100.0 * (pred - meas) / meas})
    last = rows[-1] if rows else None
    out: dict[str, Any] = {
        "table": table.name, "strategy": table.strategy, "rnn": table.rnn,
        "source": table.source, "fit_n": fit_n, "family": choice.fit.family.name,
        "formula": choice.fit.family.formula, "meaning": choice.fit.family.meaning,
        "how": choice.how, "params": choice.fit.table(),
        "scores_pct": {k: 100 * v for k, v in choice.scores.items()},
        "held_out_fit_pct": {str(n): 100 * e for n, e in choice.held_out.items()},
        "predictions": rows, "largest_n": last["n"] if last else None,
        "measured": [[n, w] for n, w in zip(table.gpus, table.words_per_s, strict=True)],
        "fit_curve": [[n, n * words / choice.fit.predict(n)[0]] for n in table.gpus],
        "error_at_largest_pct": last["error_pct"] if last else None}
    out["family_chosen"] = bool(choice.scores)
    out["note"] = _not_chosen_note(table, fit_n, fit_max, choice)
    out["within_goal"] = last is not None and abs(last["error_pct"]) <= GOAL_PCT
    out["residual_from_n"] = next((r["n"] for r in rows if abs(r["error_pct"]) > STRETCH_PCT),
                                  None)
    return out


def run_backtest(directory: Path | None = None, fit_max: int = FIT_MAX) -> dict[str, Any]:
    """Back-test every table; ``entries`` holds one row per table and held-out n.

    Raises:
        HvdscaleError: ``fit_max`` leaves a table no rank count to predict, or only its 1-GPU
            row to fit on.
    """
    tables = load_tables(directory) if directory else load_tables()
    short = [f"{t.name} (largest n {max(t.gpus)})" for t in tables if max(t.gpus) <= fit_max]
    if short or not tables:
        raise HvdscaleError(f"--fit-max {fit_max} leaves nothing to predict in "
                            f"{', '.join(short) or 'any table (no tables)'}: choose --fit-max "
                            "below every table's largest n")
    alone = [t.name for t in tables if sum(n <= fit_max for n in t.gpus) < 2]
    if alone:
        raise HvdscaleError(f"--fit-max {fit_max} leaves only the 1-GPU row to fit on in "
                            f"{', '.join(alone)}: a fit needs at least 2 GPU counts at or "
                            "below --fit-max (raise it to the table's next GPU count)")
    per = [backtest_table(t, fit_max) for t in tables]
    entries = [r for p in per for r in p["predictions"]]
    worst = max(per, key=lambda p: abs(p["error_at_largest_pct"] or 0.0))
    errs = [abs(e["error_pct"]) for e in entries]
    return {"kind": "backtest", "fit_max_n": fit_max, "goal_pct": GOAL_PCT,
            "stretch_pct": STRETCH_PCT, "tables": per, "entries": entries,
            "overall": {"worst_table": worst["table"],
                        "worst_error_at_largest_pct": worst["error_at_largest_pct"],
                        "tables_within_goal": sum(p["within_goal"] for p in per),
                        "tables": len(per), "mean_abs_error_pct": float(np.mean(errs)),
                        "max_abs_error_pct": float(np.max(errs)),
                        "interval_coverage": sum(e["inside_interval"] for e in entries),
                        "held_out_points": len(entries),
                        "family_not_chosen": [p["table"] for p in per if p["note"]]}}


def _family(p: dict[str, Any]) -> str:
    """The family's name, marked where the points could not choose it (raw files made before
    the mark carry no ``family_chosen``: their families were chosen)."""
    return p["family"] + ("" if p.get("family_chosen", True) else " (not chosen)")


def render_summary(result: dict[str, Any]) -> str:
    """The 10-row table: family, error at the largest n, where the residual starts."""
    lines = ["|Table|Strategy|Family (chosen by held-out error)|Largest n|Measured words/s|"
             "Predicted words/s|Error (%)|Within 10 %|Residual > 5 % from n|",
             "|:--|:--|:--|--:|--:|--:|--:|:--|--:|"]
    for p in result["tables"]:
        last = p["predictions"][-1]
        lines.append(f"|{p['table']}|{p['strategy']}|{_family(p)}|{last['n']}|"
                     f"{last['measured_words_per_s']:.0f}|{last['predicted_words_per_s']:.0f}|"
                     f"{last['error_pct']:+.1f}|{'yes' if p['within_goal'] else 'no'}|"
                     f"{p['residual_from_n'] or '-'}|")
    o = result["overall"]
    lines.append("")
    lines.append(f"Worst at the largest n: {o['worst_table']} "
                 f"{o['worst_error_at_largest_pct']:+.1f} %; {o['tables_within_goal']} of "
                 f"{o['tables']} tables within "
                 f"{result['goal_pct']:g} % (each table the notes' one measurement per n: "
                 "a fit checked, not a verdict from paired rounds); mean |error| over every "
                 "held-out n "
                 f"{o['mean_abs_error_pct']:.1f} %.")
    if "interval_coverage" in o:  # absent from raw files made before it was counted
        lines.append(f"The 95 % prediction interval holds {o['interval_coverage']} of the "
                     f"{o['held_out_points']} held-out measurements.")
    notes = [p["note"] for p in result["tables"] if p.get("note")]
    if notes:
        lines += ["", "Family not chosen (too few GPU counts to fit on):", ""]
        lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def render(result: dict[str, Any]) -> str:
    """Everything: per table its fit and each held-out n, then the summary."""
    lines = [f"# hvdscale backtest: fit on n <= {result['fit_max_n']}, predict the rest\n"]
    for p in result["tables"]:
        params = ", ".join(f"{q['name']} = {q['value']:.4g}"
                           + (f" +- {q['se']:.2g}" if q["se"] is not None else " (se unknown)")
                           for q in p["params"])
        held = (", ".join(f"n={n}: {e:+.1f} %" for n, e in p["held_out_fit_pct"].items())
                or "none (too few GPU counts to leave one out)")
        lines += [f"## {p['table']} ({p['strategy']}, {p['rnn']})",
                  *([f"- NOTE: {p['note']}"] if p.get("note") else []),
                  f"- family: {_family(p)}: t(n) = t0 + {p['formula']} ({p['meaning']}); "
                  f"{'chosen by' if p.get('family_chosen', True) else 'shown as'} {p['how']}",
                  f"- parameters: {params}", f"- held-out error on the fitted points: {held}",
                  "", "|n|Measured words/s|Predicted words/s|95 % prediction interval|"
                  "Error (%)|",
                  "|--:|--:|--:|:--|--:|"]
        for r in p["predictions"]:
            lo, hi = r["interval_words_per_s"]
            iv = f"{lo:.0f} - {hi:.0f}" if lo is not None and hi is not None else "unbounded"
            lines.append(f"|{r['n']}|{r['measured_words_per_s']:.0f}|"
                         f"{r['predicted_words_per_s']:.0f}|{iv}|{r['error_pct']:+.1f}|")
        if not p["within_goal"]:
            lines.append(f"\nThe chosen family misses by more than {result['goal_pct']:g} % "
                         f"at n = {p['largest_n']}; the residual exceeds "
                         f"{result['stretch_pct']:g} % from n = {p['residual_from_n']}.")
        lines.append("")
    lines += ["## Summary", "", render_summary(result)]
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> Path:
    """PNG: per table, measured words/s, the fit's prediction and its interval."""
    tabs = result["tables"]
    cols = 5
    rows = math.ceil(len(tabs) / cols)
    # raw files made before the points were carried: the shipped tables
    shipped = {t.name: [[n, w] for n, w in zip(t.gpus, t.words_per_s, strict=True)]
               for t in load_tables()} if any("measured" not in p for p in tabs) else {}
    with figure(path, rows, cols, figsize=(3.4 * cols, 3.0 * rows), squeeze=False) as (fig, ax):
        for a, p in zip(ax.flat, tabs, strict=False):
            pts = p.get("measured") or shipped.get(p["table"])
            if pts:
                a.plot(*zip(*pts, strict=True), "ko", ms=3, label="measured")
            pr = p["predictions"]
            ns = [r["n"] for r in pr]
            a.plot(*zip(*p["fit_curve"], strict=True), "C1-", label="fit (n <= "
                   f"{result['fit_max_n']}) and prediction")
            lo = [r["interval_words_per_s"][0] or np.nan for r in pr]
            hi = [r["interval_words_per_s"][1] or np.nan for r in pr]
            a.fill_between(ns, lo, hi, color="C1", alpha=0.25, label="95 % prediction interval")
            a.axvline(result["fit_max_n"] + 0.5, color="grey", ls=":", lw=1)
            a.set_title(f"{p['table']}\n{_family(p)}", fontsize=7)
            a.set_xlabel("GPUs", fontsize=7)
            a.tick_params(labelsize=6)
        for a in list(ax.flat)[len(tabs):]:
            a.axis("off")
        ax.flat[0].legend(fontsize=6)
        fig.suptitle(f"back-test: fit on n <= {result['fit_max_n']}", fontsize=9)
    return path
