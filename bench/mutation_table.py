"""The mutation benchmark's score and table (issue 39), computed from a raw result alone
(bench/results/mutation.json; bench/bench_mutation.py writes it and ``--render`` prints this)."""

from __future__ import annotations

from typing import Any

from mutation_explained import EQUIVALENT, KILLED_AFTER


def restamp(raw: dict[str, Any]) -> dict[str, Any]:
    """The raw result with each survivor's reason taken from ``EQUIVALENT`` as it is now (a
    survivor explained after its run needs no rerun; one no longer listed is OPEN again)."""
    for m in raw["modules"]:
        for s in m["survivors"]:
            s["equivalent"] = EQUIVALENT.get((m["name"], s["before"], s["after"]))
    return raw


def score(mod: dict[str, Any]) -> tuple[int, int, float]:
    """(equivalent mutants, non-equivalent mutants, share of those killed) of one module."""
    # A mutant whose tests ran past mutmut's limit did not pass them: detected, as mutation
    # tools count it (a hang is a failure), and on a loaded machine a slow start is no survivor.
    # mutmut's "suspicious" is a mutant its tests failed, only more slowly than the baseline
    # run: killed (``killed`` below counts both).
    eq = sum(1 for s in mod["survivors"] if s["equivalent"] and s["status"] == "bad_survived")
    real = mod["mutants"] - eq - mod["untested"]
    return eq, real, ((killed(mod) + mod["timed_out"]) / real if real else 1.0)


def killed(mod: dict[str, Any]) -> int:
    """Mutants whose tests failed: mutmut's killed and its suspicious (failed, slowly)."""
    return mod["killed"] + mod.get("suspicious", 0)


def raw_rate(mod: dict[str, Any]) -> float:
    """Killed over mutants tested: no timeout counted as a kill, no survivor explained away."""
    tested = mod["mutants"] - mod["untested"]
    return killed(mod) / tested if tested else 1.0


def meets_goal(mod: dict[str, Any]) -> bool:
    return score(mod)[2] >= (1.0 if mod["full"] else 0.9)


def render(raw: dict[str, Any], planned: list[str]) -> str:
    """The per-module table and the survivors, from the raw result alone (``planned``: every
    target's name, for those not run yet)."""
    out = [f"{raw['tool']}; each module against the tests named in bench/bench_mutation.py; "
           "raw kill rate = killed / mutants tested (no timeout, no explanation counted); "
           "score = (killed + timed out) / (mutants - explained); "
           "goal 90%, 100% where marked *.", "",
           "| module | mutants | killed | survived | timed out | explained | raw kill rate "
           "| score | goal met | seconds | load 1-min before/after |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for m in raw["modules"]:
        eq, _, sc = score(m)
        out.append(f"| {m['name']}{' *' if m['full'] else ''} | {m['mutants']} | {killed(m)} "
                   f"| {m['survived']} | {m['timed_out']} | {eq} | {100 * raw_rate(m):.1f}% "
                   f"| {100 * sc:.1f}% | "
                   f"{_goal(m)} | {m['seconds']:.0f} | "
                   f"{m['load_before'][0]:.1f}/{m['load_after'][0]:.1f} |")
    for m in raw["modules"]:
        if m.get("tool_error") or m["untested"]:
            out += ["", f"{m['name']}: {m['untested']} mutants not tested (lines "
                    f"{', '.join(map(str, m.get('untested_lines', [])))})"
                    + (f"; mutmut stopped with: {m['tool_error']}" if m.get("tool_error") else "")]
    for m in raw["modules"]:
        if m.get("tool_restarts"):
            out += ["", f"{m['name']}: mutmut stopped on an error of its own and ran again over "
                    f"its cache ({len(m['tool_restarts'])}x): {m['tool_restarts'][0]}"]
    ran = {m["name"] for m in raw["modules"]}
    missing = [name for name in planned if name not in ran and not raw.get("ci")]
    if missing:
        out += ["", f"Not run yet: {', '.join(missing)}."]
    out += ["", "Survivors (line: before -> after: why explained, or OPEN):", ""]
    for m in raw["modules"]:
        for s in m["survivors"]:
            out.append(f"- {m['name']}:{s['line']} `{s['before']}` -> `{s['after']}`"
                       f"{' (' + s['status'] + ')' if s['status'] != 'bad_survived' else ''}: "
                       f"{s['equivalent'] or _after(m['name'], s)}")
    if not any(m["survivors"] for m in raw["modules"]):
        out.append("- none")
    return "\n".join(out) + "\n"


def _goal(m: dict[str, Any]) -> str:
    if not meets_goal(m):
        return "NO"
    return "yes, of those tested" if m["untested"] else "yes"


def _after(name: str, s: dict[str, Any]) -> str:
    if s["status"] == "bad_timeout":
        return "detected (its tests did not pass in time)"
    if s["status"] == "ok_suspicious":
        return "killed (its tests failed, more slowly than the unmutated run)"
    test = KILLED_AFTER.get((name, s["before"], s["after"]))
    return f"OPEN in this run; killed since by {test}" if test else "OPEN"
