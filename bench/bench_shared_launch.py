"""Issue 53: one launch per round against a launch per point, paired.

Each round runs the same sweep into fresh results directories in each way asked (``--ways``):
as it runs by default (the points of a rank count in one launch), with ``--launch-per-point``,
and, as ``target``, one launch per round measuring to a precision target (``--target-set``).
The ways' order rotates from round to round, and so does the strategies' order (each sweep is
one round, so this is the rotation a sweep gives its own rounds). Per round and point it keeps
words/s, the parameters at the window's end, the interval and the load; per sweep its cost
(``hvdscale.study.sweep.cost``: launches, start-up, warm-up, measured and the rest a point
costs) and its wall time, with the 1-minute load before and after. ``--render`` prints
BENCHMARKS.md's table from the raw file alone.

    nice -n 5 python bench/bench_shared_launch.py --rounds 5 --np 2 \\
        --strategies horovod,ps,independent,ddp --json bench/results/shared_launch.json
    python bench/bench_shared_launch.py --render bench/results/shared_launch.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from emit import emit, paired, quiet_label, recorded_loads  # bench/ is on sys.path

from hvdscale.records.run import RunRecord
from hvdscale.study.sweep.cost import sweep_cost
from hvdscale.study.sweep.launcher import read_out

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}  # the sweep sets its launches' own


WAYS = ("shared", "alone", "target")
"""One launch per round; a launch per point; one launch per round measuring each point to a
precision target (``--target-set``, only when given)."""


def one_sweep(args: argparse.Namespace, out: Path, way: str, r: int) -> dict[str, Any]:
    """One sweep into ``out``; its points' words/s and fingerprints, its cost and wall time.
    The strategies' order is rotated by ``r``: each sweep is a round of its own, so the
    rotation a sweep gives its rounds is given here (no point always first in its launch)."""
    alone = way == "alone"
    names = args.strategies.split(",")
    order = ",".join(names[r % len(names):] + names[:r % len(names)])
    cmd = [sys.executable, "-m", "hvdscale", "sweep", args.config, "--np", args.np,
           "--strategies", order, "--out", str(out), "--no-plot",
           *(["--frameworks", args.frameworks] if args.frameworks else []),
           *(["--repeats", str(args.sweep_repeats)] if args.sweep_repeats > 1 else []),
           *(a for s in args.set for a in ("--set", s)),
           *(a for s in (args.target_set if way == "target" else []) for a in ("--set", s)),
           *(["--launch-per-point"] if alone else [])]
    load_before = list(os.getloadavg())
    t0 = time.monotonic()
    r = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"sweep failed ({way}): {r.stderr[-2000:]}")
    recs = [x for x in read_out(out) if isinstance(x, RunRecord)]
    cost = sweep_cost(recs, out)
    points = {_label(x): {"words_per_s": x.words_per_s,
                          "fingerprints": x.fingerprints,
                          "position": x.launch.position if x.launch else None,
                          "window_s": x.window_s, "warmup_s": x.warmup_s,
                          "rel_ci95": x.interval.rel_ci95 if x.interval else None,
                          "target_met": x.interval.met if x.interval else None,
                          "loadavg": x.loadavg} for x in recs}
    return {"wall_s": round(wall, 3), "load_before": load_before,
            "load_after": list(os.getloadavg()), "points": points,
            "cost": {**asdict(cost), "rest_s": cost.rest_s, "per_point_s": cost.per_point_s,
                     "measured_fraction": cost.measured_fraction} if cost else None}


def _label(rec: RunRecord) -> str:
    # The name carries the sweep's own round (``--sweep-repeats``).
    return (f"{rec.config.framework} {rec.strategy_name} "
            f"np={rec.ranks} {rec.name}")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every round, every way, the order rotated from round to round."""
    ways = [w for w in args.ways.split(",") if w in WAYS]
    rounds = []
    with tempfile.TemporaryDirectory(prefix="bench-shared-") as tmp:
        for r in range(args.rounds):
            got: dict[str, Any] = {}
            k = r % len(ways)
            for way in ways[k:] + ways[:k]:
                got[way] = one_sweep(args, Path(tmp) / f"r{r}_{way}", way, r)
                print(f"round {r + 1}/{args.rounds} {way}: {got[way]['wall_s']:.1f} s",
                      file=sys.stderr, flush=True)
            got["first"] = ways[k]
            rounds.append(got)
    return summarize({"config": args.config, "np": args.np, "strategies": args.strategies,
                      "frameworks": args.frameworks, "set": args.set,
                      "target_set": args.target_set, "rounds": rounds,
                      "sweep_repeats": args.sweep_repeats,
                      "host_cores": os.cpu_count()})


def ways_of(raw: dict[str, Any]) -> list[str]:
    """The ways the raw file measured, in ``WAYS`` order."""
    return [w for w in WAYS if w in raw["rounds"][0]]


def summarize(raw: dict[str, Any]) -> dict[str, Any]:
    """The figures, from the rounds alone (``--render`` recomputes them)."""
    rounds, ways = raw["rounds"], ways_of(raw)
    labels = sorted(rounds[0][ways[0]]["points"])

    def wps(way: str, p: str) -> list[float]:
        return [r[way]["points"][p]["words_per_s"] for r in rounds]

    pair = "shared" in ways and "alone" in ways
    # Under a precision target each run stops at its own step: parameters cannot be compared.
    fixed = not any("target_rel_ci" in x for x in raw["set"])
    all_ratios = [a / b for p in labels for a, b in zip(wps("shared", p), wps("alone", p),
                                                        strict=True)] if pair else []
    same = (None if not (pair and fixed) else
            all(r["shared"]["points"][p]["fingerprints"] == r["alone"]["points"][p]["fingerprints"]
                for r in rounds for p in labels))

    def med(way: str, key: str) -> float:
        return statistics.median(r[way]["cost"][key] for r in rounds)

    def rel(way: str) -> list[float]:
        return [x["rel_ci95"] for r in rounds for x in r[way]["points"].values()
                if x.get("rel_ci95") is not None]

    raw["summary"] = {
        "ratio_shared_over_alone": {p: paired(wps("shared", p), wps("alone", p))
                                    for p in labels} if pair else {},
        "ratio_all_points": {"median": statistics.median(all_ratios), "min": min(all_ratios),
                             "max": max(all_ratios), "n": len(all_ratios)} if pair else None,
        "fingerprints_identical": same,
        "wall_over_alone": {w: paired([r[w]["wall_s"] for r in rounds],
                                      [r["alone"]["wall_s"] for r in rounds])
                            for w in ways if "alone" in ways},
        "per_point_s": {w: med(w, "per_point_s") for w in ways},
        "per_point_all_in_s": {w: statistics.median(
            (r[w]["cost"]["launch_s"] - r[w]["cost"]["warmup_s"] - r[w]["cost"]["measured_s"])
            / r[w]["cost"]["points"] for r in rounds) for w in ways},
        "startup_s_per_launch": {w: med(w, "startup_s") / med(w, "launches") for w in ways},
        "measured_fraction": {w: med(w, "measured_fraction") for w in ways},
        "wall_s": {w: statistics.median(r[w]["wall_s"] for r in rounds) for w in ways},
        "rel_ci95": {w: rel(w) for w in ways},
        "target_met": {w: [x["target_met"] for r in rounds for x in r[w]["points"].values()
                           if x.get("target_met") is not None] for w in ways}}
    return raw


HEADS = {"shared": "one launch per round", "alone": "a launch per point",
         "target": "one launch per round, to a precision target"}


def render(raw: dict[str, Any]) -> str:
    """BENCHMARKS.md's table and the notes under it."""
    s = summarize(raw)["summary"]
    return "\n".join([*_cost_table(raw, s), *_notes(raw, s)]) + "\n"


def _cost_table(raw: dict[str, Any], s: dict[str, Any]) -> list[str]:
    """The table's lines: per way, the sweep's wall time and where the launches' time went."""
    ways, n = ways_of(raw), len(raw["rounds"])

    def med(way: str, key: str) -> float:
        return statistics.median(r[way]["cost"][key] for r in raw["rounds"])

    what = (f"{raw['frameworks'] or 'torch'} x {raw['strategies']} at np={raw['np']}"
            + (f", {raw['sweep_repeats']} rounds a sweep" if raw.get("sweep_repeats", 1) > 1
               else "") + (f"; {' '.join(raw['set'])}" if raw["set"] else ""))

    def row(label: str, cell: Any) -> str:
        return f"| {label} | " + " | ".join(cell(w) for w in ways) + " |"

    def wall_ratio(w: str) -> str:
        r = s["wall_over_alone"].get(w)
        if w == "alone" or r is None:
            return "1" if w == "alone" else "-"
        return f"{r['median']:.2f} [{r['min']:.2f}-{r['max']:.2f}]"

    def interval(w: str) -> str:
        rel, met = s["rel_ci95"][w], s["target_met"][w]
        if not rel:
            return "-"
        return (f"+-{100 * statistics.median(rel):.1f}% (up to +-{100 * max(rel):.1f}%), "
                f"met in {sum(met)} of {len(met)}")

    return [f"| {what}; {n} paired runs | " + " | ".join(HEADS[w] for w in ways) + " |",
            "|---|" + "---|" * len(ways),
            row("sweep wall time, median (s)", lambda w: f"{s['wall_s'][w]:.1f}"),
            row("wall time / a launch per point's, paired: median [range]", wall_ratio),
            row("ranks' start-up a launch (s)",
                lambda w: f"{s['startup_s_per_launch'][w]:.2f}"),
            row("a point's own cost beyond its warm-up and measured steps (s)",
                lambda w: f"{s['per_point_s'][w]:.2f}"),
            row("the same with the launch's start-up shared by its points (s)",
                lambda w: f"{s['per_point_all_in_s'][w]:.2f}"),
            row("the launches' time: start-up + warm-up + measured + rest (s)",
                lambda w: " + ".join(f"{med(w, k):.1f}" for k in (
                    "startup_s", "warmup_s", "measured_s", "rest_s"))),
            row("measured share of the launches' time",
                lambda w: f"{100 * s['measured_fraction'][w]:.0f}%"),
            row("95% interval of a point's words/s, median; target met", interval)]


def _notes(raw: dict[str, Any], s: dict[str, Any]) -> list[str]:
    """The lines under the table: the precision target, the paired words/s ratios and whether
    the parameters matched, and the load."""
    lines = []
    if raw.get("target_set"):
        lines.append(f"\nPrecision target: {' '.join(raw['target_set'])}.")
    loads = recorded_loads(raw, skip=("loadavg_emit",))
    a = s["ratio_all_points"]
    if a is not None:
        lines.append(f"\nwords/s one launch per round / a launch per point, every point and "
                     f"run: median {a['median']:.3f} [{a['min']:.3f}-{a['max']:.3f}], "
                     f"n={a['n']}; parameters bit-identical: "
                     + {True: "yes", False: "NO", None: "not compared (under a precision "
                        "target each run stops at its own step)"}[s["fingerprints_identical"]]
                     + ".")
    lines.append(f"\n1-minute load {min(loads):.1f}-{max(loads):.1f}, quiet="
                 f"{quiet_label(raw)['quiet']}.")
    for p, r in s["ratio_shared_over_alone"].items():
        lines.append(f"- {p}: {r['median']:.3f} [{r['min']:.3f}-{r['max']:.3f}]")
    return lines


def main() -> int:
    """Run the rounds (or ``--render`` a raw file) and emit the raw result."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--np", default="2")
    ap.add_argument("--strategies", default="horovod,ps,independent,ddp")
    ap.add_argument("--frameworks", default="")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sweep-repeats", type=int, default=1,
                    help="each sweep's own --repeats (the demo's 2)")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--target-set", action="append", default=[],
                    help="the way 'target': one launch per round with these --set too (e.g. "
                    "measure.target_rel_ci=0.02)")
    ap.add_argument("--ways", default="shared,alone",
                    help="which of shared, alone, target to run, in that order each round "
                    "(rotated from round to round)")
    ap.add_argument("--json", default="")
    ap.add_argument("--render", default="")
    args = ap.parse_args()
    if args.render:
        print(render(json.loads(Path(args.render).read_text())), end="")
        return 0
    emit(run(args), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
