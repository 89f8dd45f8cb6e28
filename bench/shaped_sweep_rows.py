"""The shaped-link sweep's table (bench/bench_shaped_sweep.py), rendered from the raw rows alone:
per config, strategy and rate, the measured words/s and each prediction's error
(``hvdscale.study.predict.on_link`` says how each is made).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

HOWS = ("unfitted", "rate-only", "fit", "own-compute")
"""The ways a point is predicted (``hvdscale.study.predict.on_link``), in the table's order."""
GOAL_PCT = 10.0
"""Issue 63's goal: predict within 10 % of measured words/s (horovod and ps, >= 1 Gbit/s)."""


def _err(r: dict[str, Any]) -> float:
    return 100.0 * (r["predicted_words_per_s"] - r["measured_words_per_s"]) / \
        r["measured_words_per_s"]


def _cell(errs: list[float]) -> str:
    return f"{statistics.median(errs):+.1f} ({min(errs):+.1f} to {max(errs):+.1f})"


def _measured(raw: dict[str, Any], cfg: str, s: str, rate: float) -> dict[int, float]:
    """Per round, the np=2 words/s of series ``s`` at ``rate``."""
    return {r["round"]: r["measured_words_per_s"] for r in raw["rows"]
            if (r["config"], r["strategy"], r["rate_gbit"], r["how"]) == (cfg, s, rate,
                                                                           "unfitted")}


def _one_rank(raw: dict[str, Any], cfg: str, s: str, rate: float) -> dict[int, float]:
    """Per round, the 1-rank words/s of strategy ``s`` in that rate's sweep."""
    return {run["round"]: run["one_rank_words_per_s"][cfg][s] for run in raw["runs"]
            if run["rate_gbit"] == rate and s in run["one_rank_words_per_s"].get(cfg, {})}


def _paired(a: dict[int, float], b: dict[int, float]) -> list[float]:
    return [a[k] / b[k] for k in sorted(a) if k in b]


def pair_ratios(raw: dict[str, Any], cfg: str, a: str, b: str, rate: float) -> list[float]:
    """A / B of the np=2 words/s at ``rate``, round by round (the table's and
    tools/checks/check_verdicts.py's pairing)."""
    return _paired(_measured(raw, cfg, a, rate), _measured(raw, cfg, b, rate))


def speedup_ratios(raw: dict[str, Any], cfg: str, s: str, rate: float) -> list[float]:
    """np=2 over np=1 words/s of strategy ``s`` at ``rate``, round by round (both points of
    one round's sweep)."""
    return _paired(_measured(raw, cfg, s, rate), _one_rank(raw, cfg, s, rate))


def _verdict_cell(v: Any) -> str:
    word = {"faster": "faster", "slower": "slower", "equivalent": "same within 2 %"}
    return f"{v.interval().split(',')[0]}: {word.get(v.outcome, 'undecided')}"


def _verdicts(raw: dict[str, Any]) -> list[str]:
    """Per config and rate, paired by round and decided by the one procedure (issue 62): the
    parameter servers and DDP against Horovod, and each strategy's np=2 over its np=1."""
    from hvdscale.study.verdict import decide

    pairs = [("ps", "horovod"), ("ps2", "horovod"), ("ddp", "horovod")]
    ups = ("horovod", "ps", "ddp")
    lines = ["| config | set Gbit/s | " + " | ".join(f"{a} / {b}" for a, b in pairs) + " | "
             + " | ".join(f"{s} np=2 / np=1" for s in ups) + " |",
             "|:--|--:|" + ":--|" * (len(pairs) + len(ups))]
    for cfg in raw["configs"]:
        for rate in sorted(raw["rates"], reverse=True):
            cells = [_verdict_cell(decide(pair_ratios(raw, cfg, a, b, rate)))
                     for a, b in pairs]
            cells += [_verdict_cell(decide(speedup_ratios(raw, cfg, s, rate))) for s in ups]
            lines.append(f"| {Path(cfg).stem} | {rate:g} | " + " | ".join(cells) + " |")
    return lines


def _fit_line(rows: list[dict[str, Any]]) -> str:
    """How many horovod and ps fit rows (any rate below the fastest) are within the goal."""
    fit = [r for r in rows if r["how"] == "fit" and r["strategy"].startswith(("horovod", "ps"))]
    return f"{sum(abs(_err(r)) <= GOAL_PCT for r in fit)} of {len(fit)}"


def _cost_line(raw: dict[str, Any]) -> str:
    """What measuring cost: the sweeps' and commbench's wall time per rate and round."""
    sweeps = [sum(c["sweep_wall_s"]) for run in raw["runs"] for c in run["configs"].values()]
    comm = [run["commbench_wall_s"] for run in raw["runs"]]
    return (f"A config's two sweeps at one rate and round (9 points, 3 launches with their "
            f"start-up) took {statistics.median(sweeps):.0f} s ({min(sweeps):.0f}-"
            f"{max(sweeps):.0f}), the link's commbench {statistics.median(comm):.0f} s.")


def _compute_line(rows: list[dict[str, Any]]) -> str:
    """The compute term's miss: each horovod and ps point's own compute (with its straggler
    idle) over the predicted one (the independent replicas' at np=2 in the same launch)."""
    got = [r["measured_compute_s"] / r["predicted_compute_s"] for r in rows
           if r["how"] == "unfitted" and r["strategy"].startswith(("horovod", "ps"))]
    drift = []
    for cfg in sorted({r["config"] for r in rows}):
        ind = [1e3 * r["measured_compute_s"] for r in rows if (r["how"], r["strategy"],
               r["config"]) == ("unfitted", "independent", cfg)]
        drift.append(f"{min(ind):.1f}-{max(ind):.1f} ms on {Path(cfg).stem}")
    return (f"The points' own compute over the predicted compute: median "
            f"{statistics.median(got):.3f} ({min(got):.3f}-{max(got):.3f}) over {len(got)} "
            f"points at every rate; the independent replicas' own compute a step at np=2, over "
            f"every rate and round: {', '.join(drift)}.")


def render(raw: dict[str, Any]) -> str:
    """Per config, strategy and rate: measured words/s and each prediction's error, median
    (min to max) over rounds, from the raw rows alone; then the goal's verdict."""
    rows = raw["rows"]
    lines = ["| config | strategy | set Gbit/s | link measured | measured words/s | "
             + " | ".join(f"{h} error %" for h in HOWS) + " | rounds |",
             "|:--|:--|--:|--:|--:|" + "--:|" * len(HOWS) + "--:|"]
    keys = sorted({(r["config"], r["strategy"], r["rate_gbit"]) for r in rows},
                  key=lambda k: (k[0], k[1], -k[2]))
    within, total, own_within = 0, 0, 0
    for cfg, s, rate in keys:
        mine = [r for r in rows if (r["config"], r["strategy"], r["rate_gbit"]) == (cfg, s, rate)]
        unf = [r for r in mine if r["how"] == "unfitted"]
        cells = []
        for h in HOWS:
            errs = [_err(r) for r in mine if r["how"] == h]
            cells.append(_cell(errs) if errs else "-")
        if s.startswith(("horovod", "ps")) and rate >= 1:
            total += len(unf)
            within += sum(abs(_err(r)) <= GOAL_PCT for r in unf)
            own_within += sum(abs(_err(r)) <= GOAL_PCT for r in mine if r["how"] == "own-compute")
        lines.append(f"| {Path(cfg).stem} | {s} | {rate:g} | "
                     f"{statistics.median(r['link_measured_gbit'] for r in unf):.2f} | "
                     f"{statistics.median(r['measured_words_per_s'] for r in unf):,.0f} | "
                     + " | ".join(cells) + f" | {len(unf)} |")
    loads = [x for run in raw["runs"] for x in run["loadavg"]]
    lines += ["", f"Unfitted predictions of horovod and ps at 1 Gbit/s and above within "
              f"{GOAL_PCT:.0f} % of the measurement: {within} of {total} (rounds x points); "
              f"given each point's own measured compute (the network model alone): "
              f"{own_within} of {total}; carried from the fastest link (fit, at the slower "
              f"rates): {_fit_line(rows)}. {_compute_line(rows)} {_cost_line(raw)} "
              f"{raw['rounds']} interleaved rounds; {raw['cores']} cores; 1-minute load "
              f"{min(loads):.2f}-{max(loads):.2f}; {raw['mpi_transports']}.", "",
              *_verdicts(raw)]
    return "\n".join(lines) + "\n"
