"""The mutation benchmark's score and table (issue 39), computed from a raw result alone
(bench/results/mutation.json; bench_mutation.py writes it and ``--render`` prints this)."""

from __future__ import annotations

from typing import Any

from emit import QUIET_LOAD
from mutation_explained import EQUIVALENT, KILLED_AFTER


def restamp(raw: dict[str, Any]) -> dict[str, Any]:
    """The raw result with each survivor's reason taken from ``EQUIVALENT`` as it is now (a
    survivor explained after its run needs no rerun; one no longer listed is OPEN again)."""
    for m in raw["modules"]:
        for s in m["survivors"]:
            s["equivalent"] = EQUIVALENT.get((m["name"], s["before"], s["after"]))
    return raw


def _rerun(s: dict[str, Any]) -> str | None:
    """What the survivor's one rerun at 4x found (tools/mutation/mutation_recheck.py), if it ran."""
    return (s.get("recheck") or {}).get("outcome")


def rerun_kills(mod: dict[str, Any]) -> int:
    """Open mutants whose tests failed when rerun: killed, by tests the first run may not have
    had (a timeout that failed outright at 4x is one too)."""
    return sum(1 for s in mod["survivors"] if _rerun(s) == "killed")


def confirmed_timeouts(mod: dict[str, Any]) -> int:
    """Timeouts that ran past 4x the limits again, rerun on a quiet machine: only these count
    as detected by a timeout."""
    return sum(1 for s in mod["survivors"] if s["status"] == "bad_timeout"
               and _rerun(s) == "timeout" and s["recheck"]["load_before"][0] <= QUIET_LOAD)


def score(mod: dict[str, Any]) -> tuple[int, int, float]:
    """(equivalent mutants, non-equivalent mutants, share of those detected) of one module.

    Detected: its tests failed (mutmut's killed and suspicious, or the rerun's kills), or it
    timed out and did so again at 4x the limits on a quiet machine. A timeout not rerun so is
    no detection: on a loaded machine a slow mutant that would pass reaches mutmut's limit."""
    eq = sum(1 for s in mod["survivors"] if s["equivalent"] and s["status"] == "bad_survived"
             and _rerun(s) != "killed")
    real = mod["mutants"] - eq - mod["untested"]
    found = killed(mod) + rerun_kills(mod) + confirmed_timeouts(mod)
    return eq, real, (found / real if real else 1.0)


def killed(mod: dict[str, Any]) -> int:
    """Mutants whose tests failed in mutmut's run: its killed and its suspicious (failed,
    slowly)."""
    return mod["killed"] + mod.get("suspicious", 0)


def raw_rate(mod: dict[str, Any]) -> float:
    """Killed over mutants tested: no timeout counted as a kill, no survivor explained away."""
    tested = mod["mutants"] - mod["untested"]
    return killed(mod) / tested if tested else 1.0


def meets_goal(mod: dict[str, Any]) -> bool:
    """The score's goal (90%, 100% where ``full``), with at most one mutant in ten explained
    as equivalent (one in a module of fewer than ten)."""
    eq, _, sc = score(mod)
    return sc >= (1.0 if mod["full"] else 0.9) and eq <= max(1.0, mod["mutants"] / 10)


def render(raw: dict[str, Any], planned: list[str]) -> str:
    """The per-module table and the survivors, from the raw result alone (``planned``: every
    target's name, for those not run yet)."""
    out = [f"{raw['tool']}; each module against the tests named in "
           "tools/mutation/mutation_targets.py; raw kill rate = killed in mutmut's run / mutants "
           "tested (no timeout, no rerun, no explanation counted); score = (killed + killed on "
           "rerun + timeouts confirmed at 4x on a quiet machine) / (mutants - explained); goal "
           "90%, 100% where marked *, with at most one mutant in ten explained.", "",
           "| module | mutants | killed | survived | timed out | killed on rerun "
           "| timeouts confirmed | explained | raw kill rate | score | goal met | seconds "
           "| load 1-min before/after |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for m in raw["modules"]:
        eq, _, sc = score(m)
        out.append(f"| {m['name']}{' *' if m['full'] else ''} | {m['mutants']} | {killed(m)} "
                   f"| {m['survived']} | {m['timed_out']} | {rerun_kills(m)} "
                   f"| {confirmed_timeouts(m)} | {eq} | {100 * raw_rate(m):.1f}% "
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
    rerun = s.get("recheck")
    if rerun:
        how = (f"rerun at {rerun['commit']} with a {rerun['limit_s']:.0f}-s limit "
               f"({rerun['seconds']:.0f} s, load {rerun['load_before'][0]:.1f})")
        if rerun["outcome"] == "killed":
            test = KILLED_AFTER.get((name, s["before"], s["after"]))
            return f"killed when {how}" + (f", by {test}" if test else "")
        if rerun["outcome"] == "timeout":
            quiet = rerun["load_before"][0] <= QUIET_LOAD
            return (f"timed out again when {how}: detected" if quiet else
                    f"timed out again when {how}, not quiet: not counted")
        return f"OPEN: its tests passed when {how}"
    if s["status"] == "bad_timeout":
        return "timed out; not rerun at 4x the limits yet: not counted"
    if s["status"] == "ok_suspicious":
        return "killed (its tests failed, more slowly than the unmutated run)"
    test = KILLED_AFTER.get((name, s["before"], s["after"]))
    return f"OPEN in this run; killed since by {test}" if test else "OPEN"
