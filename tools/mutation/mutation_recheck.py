"""A mutation result's open mutants, run once more against today's tests (issue 50).

mutmut 2.5.1 calls a mutant "timed out" when its tests ran past 10x the unmutated run's time,
and on a loaded machine a slow mutant that would pass gets there too. So a timeout counts as
detected only when the mutant, rerun once on a quiet machine with that limit and every test's
own hang limit four times longer, still does not finish (or fails). A survivor with no
explanation (one withdrawn, or one a test written after the run should kill) is rerun the same
way: it counts as killed only when this rerun saw its tests fail.

The rerun writes each mutant into a copy of the checkout from the raw file's own record of it
(its line, and that line before and after), so a result needs no mutmut cache to be checked
again; tools/mutation/mutation_table.py scores what the reruns found.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path
from typing import Any

from mutation_runner import run_status

from hvdscale.records.provenance import git_revision

MUTMUT_LIMIT = 10
"""mutmut 2.5.1's limit on a mutant's tests: 10x its baseline (the unmutated run's seconds)."""
FACTOR = 4
"""The rerun's limits: mutmut's and each test's own hang limit, this many times longer."""


def mutant_source(source: str, line: int, before: str, after: str) -> str:
    """``source`` with one mutant in it: line ``line`` (1-based), whose text is ``before``,
    rewritten to ``after`` with its indentation kept. When the module has moved since the run,
    the one line whose text is ``before`` is taken; none or several is an error naming it."""
    lines = source.split("\n")
    at = [i for i, text in enumerate(lines) if text.strip() == before]
    if line - 1 in at:
        i = line - 1
    elif len(at) == 1:
        i = at[0]
    else:
        raise ValueError(f"line {line}: `{before}` is on {len(at)} lines of the module now; "
                         "the mutant cannot be placed")
    indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
    lines[i] = indent + after
    return "\n".join(lines)


def is_open(s: dict[str, Any]) -> bool:
    """A survivor the score cannot settle without a rerun: a timeout, or a mutant whose tests
    passed and which no explanation covers."""
    return s["status"] == "bad_timeout" or (s["status"] == "bad_survived"
                                             and not s.get("equivalent"))


def measure_baseline(cmd: list[str], copy: Path, env: dict[str, str], log: Path) -> float:
    """Seconds of the unmutated tests in ``copy`` (mutmut's own baseline run, done again for a
    result whose cache is gone); a failing run is an error, as it is for mutmut."""
    t0 = time.monotonic()
    with log.open("ab") as out:
        rc = run_status(600, cmd, cwd=copy, env=env, out=out)
    if rc != 0:
        raise SystemExit(f"bench_mutation: the unmutated tests do not pass in {copy} "
                         f"(exit {rc}); see {log}")
    return time.monotonic() - t0


def recheck(mod: dict[str, Any], copy: Path, cmd: list[str], env: dict[str, str],
            baseline: tuple[float, str]) -> dict[str, Any]:
    """Rerun each open survivor of ``mod`` once in ``copy`` (its tests ``cmd``, its ``env``
    with the hang limit already raised) and record what happened on the survivor itself.

    ``baseline``: (seconds of the unmutated run, where that figure comes from)."""
    limit = FACTOR * MUTMUT_LIMIT * baseline[0]
    path, log = copy / mod["path"], copy / ".mutation-recheck.log"
    # The tests that ran: this checkout's commit, "+dirty" when they differ from it.
    pristine = path.read_text()
    commit = git_revision(Path(__file__).resolve().parents[1]) or "unknown"
    for s in mod["survivors"]:
        if not is_open(s) or s.get("recheck"):
            continue  # rerun once: a second verdict is not sought
        path.write_text(mutant_source(pristine, s["line"], s["before"], s["after"]))
        load, t0 = list(os.getloadavg()), time.monotonic()
        try:
            with log.open("ab") as out:
                rc = run_status(limit, cmd, cwd=copy, env=env, out=out)
        finally:
            path.write_text(pristine)
        s["recheck"] = {
            "outcome": "timeout" if rc is None else "survived" if rc == 0 else "killed",
            "seconds": round(time.monotonic() - t0, 1), "limit_s": round(limit, 1),
            "baseline_s": round(baseline[0], 1), "baseline_from": baseline[1],
            "test_timeout_s": int(env.get("HVDSCALE_TEST_TIMEOUT", 0)) or None,
            "load_before": load, "load_after": list(os.getloadavg()), "commit": commit,
            "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    return mod


def cached_baseline(copy: Path) -> float | None:
    """mutmut's own baseline seconds from the cache in ``copy`` (None when it has none)."""
    import sqlite3

    db = sqlite3.connect(copy / ".mutmut-cache")
    try:
        row = db.execute("SELECT value FROM MiscData WHERE key = 'baseline_time_elapsed'")
        found = row.fetchone()
    finally:
        db.close()
    return float(found[0]) if found and found[0] else None
