"""One mutation target through mutmut (issue 39), in a private copy of the checkout: the lines
it may mutate, the tests it runs after each edit (through mutation_runner.py), mutmut run and
watched for a stall, and the raw entry read back from mutmut's cache. bench_mutation.py chooses
the targets and keeps the raw file."""

from __future__ import annotations

import ast
import difflib
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mutation_explained import EQUIVALENT
from mutation_recheck import FACTOR, cached_baseline, measure_baseline, recheck
from mutation_runner import kill_session
from mutation_targets import Target

from hvdscale.records.mutation import MutationRecord

ROOT = Path(__file__).resolve().parents[2]
TOOL = "mutmut==2.5.1"
TRIES = 3  # mutmut runs a target at most this often when it stops on an error of its own
STALL_S = 900  # no mutant done for this long: mutmut is stuck (a test's own limit is 600 s)
MPI_TEST_TIMEOUT_S = 30
"""The MPI harness's per-test hang limit in a mutant's run (tests/mpi_harness.py; 120 s in CI).
A mutant that deadlocks the ranks (a send without its receive) then fails in 30 s, not 120:
the targets' MPI tests take 1-5 s each at np=2 here, so 30 s is no verdict on a slow test."""


def _function_lines(path: Path, names: tuple[str, ...]) -> set[int]:
    """Line numbers (1-based) of the named functions' bodies, docstrings left out."""
    found: dict[str, ast.AST] = {}

    def walk(body: list[ast.stmt], prefix: str) -> None:  # "Class.method.inner" names
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                found[prefix + node.name] = node
                walk(node.body, f"{prefix}{node.name}.")

    walk(ast.parse(path.read_text()).body, "")
    missing = [n for n in names if n not in found]
    if missing:
        raise SystemExit(f"bench_mutation: {path} has no function {', '.join(missing)}")
    lines: set[int] = set()
    for n in names:
        body = found[n].body  # type: ignore[attr-defined]
        if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring: mutating prose tells nothing
        for stmt in body:
            lines.update(range(stmt.lineno, stmt.end_lineno + 1))
    return lines


def _patch(copy: Path, target: Target) -> Path | None:
    """A patch that adds exactly the target functions' lines (mutmut mutates only those)."""
    if not target.functions:
        return None
    src = (copy / target.path).read_text().splitlines(keepends=True)
    keep = _function_lines(copy / target.path, target.functions)
    before = [line for i, line in enumerate(src, start=1) if i not in keep]
    diff = difflib.unified_diff(before, src, target.path, target.path, n=0)
    out = copy / ".mutation.patch"
    out.write_text("".join(diff))
    return out


def _test_cmd(target: Target) -> list[str]:
    """The target's tests; under the sweep's own launch line and environment when it needs
    ranks (issue 42: one place builds that line)."""
    pytest = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--color=no"]
    if target.np:
        return [sys.executable, "-m", "hvdscale.study.sweep.launcher", "--np", str(target.np),
                "--", *pytest, *target.tests]
    return [*pytest, *target.tests]


def _runner(target: Target) -> str:
    # Through tools/mutation/mutation_runner.py: any failing exit reaches mutmut as 1, and mutmut's
    # time limit kills the tests' every process (mutmut 2.5.1 alone does neither).
    wrap = [sys.executable, "tools/mutation/mutation_runner.py", "600"]
    return " ".join(shlex.quote(x) for x in [*wrap, *_test_cmd(target)])


def _env(target: Target, copy: Path, hang_s: int = MPI_TEST_TIMEOUT_S) -> dict[str, str]:
    """The tests' environment in ``copy``; ``hang_s``: an MPI test's own hang limit."""
    env = {**os.environ, "PYTHONPATH": str(copy), "OMP_NUM_THREADS": "1",
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("HVDSCALE_TEST_REPORTS", None)  # a mutant's failing junit files are not CI's
    if target.np:
        env["HVDSCALE_TEST_TIMEOUT"] = str(hang_s)
    return env


def _statuses(copy: Path) -> list[dict[str, Any]]:
    """Every mutant mutmut made: id, status, line number and line."""
    db = sqlite3.connect(copy / ".mutmut-cache")
    rows = db.execute("SELECT m.id, m.status, l.line_number, l.line, m.\"index\" FROM Mutant m "
                      "JOIN Line l ON m.line = l.id ORDER BY m.id").fetchall()
    db.close()
    return [{"id": i, "status": s, "line": n + 1, "text": t, "index": k}
            for i, s, n, t, k in rows]


def _diff(source: str, mutant: dict[str, Any]) -> tuple[str, str]:
    """(line before, line after) of one mutant, made again from the source in this process.

    Not ``mutmut show``: it re-reads the file into mutmut's cache, and while a run has a mutant
    on disk that rewrites the cache's lines, so the run stops with "Attribute Mutant.line is
    required" (mutmut 2.5.1; seen so, and reproduced by a ``mutmut show`` during a run)."""
    from mutmut import Context, RelativeMutationID, mutate

    mid = RelativeMutationID(line=mutant["text"], index=mutant["index"],
                             line_number=mutant["line"] - 1)
    after, _ = mutate(Context(source=source, mutation_id=mid))
    diff = list(difflib.unified_diff(source.split("\n"), after.split("\n"), lineterm="", n=0))
    old = [x[1:].strip() for x in diff if x.startswith("-") and not x.startswith("---")]
    new = [x[1:].strip() for x in diff if x.startswith("+") and not x.startswith("+++")]
    return " / ".join(old), " / ".join(new)


def _mutmut(cmd: list[str], copy: Path, env: dict[str, str]) -> tuple[int | None, str]:
    """(exit status, output) of one ``mutmut run``; (None, why) when no mutant got a status
    for ``STALL_S`` (mutmut 2.5.1 waits forever for a worker process that died)."""
    log = copy / ".mutmut-run.log"
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=copy, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        done, since = -1, time.monotonic()
        while True:
            try:
                proc.wait(timeout=10)
                return proc.returncode, log.read_text().strip()
            except subprocess.TimeoutExpired:
                pass
            now = sum(m["status"] != "untested" for m in _statuses(copy)) \
                if (copy / ".mutmut-cache").exists() else 0
            if now != done:
                done, since = now, time.monotonic()
            elif time.monotonic() - since > STALL_S:
                kill_session(proc.pid)
                proc.wait()
                return None, f"stalled: no mutant got a status in {STALL_S} s"


def run_target(target: Target, work: Path) -> dict[str, Any]:
    """Mutate one target in a fresh copy of the checkout; its counts and survivors."""
    copy = work / target.name
    shutil.rmtree(copy, ignore_errors=True)
    copy_checkout(ROOT, copy)
    env = _env(target, copy)
    cmd = ["nice", "-n", "10", "mutmut", "run", "--paths-to-mutate", target.path,
           "--runner", _runner(target), "--tests-dir", "tests", "--no-progress", "--simple-output",
           "--test-time-base", "30"]  # a shared machine: a slow run is not a timeout
    patch = _patch(copy, target)
    if patch is not None:
        cmd += ["--use-patch-file", str(patch)]
    pristine = (copy / target.path).read_bytes()
    load_before, t0 = list(os.getloadavg()), time.monotonic()
    errors: list[str] = []
    for _ in range(TRIES):
        rc, out = _mutmut(cmd, copy, env)
        if rc is not None and not rc & 1:
            break
        # A fatal error or a stall: keep what it tested, say so, never hide it, and test the
        # rest in a new run over the same cache (mutmut skips the mutants it has a status for).
        if not (copy / ".mutmut-cache").exists() or not _statuses(copy):
            raise SystemExit(f"bench_mutation: mutmut failed on {target.name} (exit {rc}): "
                             f"{out[-600:]}")
        errors.append(out.splitlines()[-1] if rc is not None else out)
        (copy / target.path).write_bytes(pristine)  # a mutant may be left on disk
        (copy / (target.path + ".bak")).unlink(missing_ok=True)
    seconds, load_after = time.monotonic() - t0, list(os.getloadavg())
    crash = errors[-1] if errors and (rc is None or rc & 1) else None
    mod = collect(target, copy, {"seconds": seconds, "load_before": load_before,
                                 "load_after": load_after, "tool_error": crash,
                                 "tool_restarts": errors,
                                 "test_timeout_s": MPI_TEST_TIMEOUT_S if target.np else None})
    base = cached_baseline(copy)
    if base is not None:  # its timeouts rerun at once, at 4x (the load then is recorded)
        recheck(mod, copy, _test_cmd(target), _env(target, copy, FACTOR * MPI_TEST_TIMEOUT_S),
                (base, "mutmut's baseline run"))
    return mod


def recheck_target(target: Target, mod: dict[str, Any], work: Path) -> dict[str, Any]:
    """Rerun an earlier result's open survivors in a fresh copy (``--recheck``)."""
    copy = work / target.name
    shutil.rmtree(copy, ignore_errors=True)
    copy_checkout(ROOT, copy)
    base = measure_baseline(_test_cmd(target), copy, _env(target, copy),
                            copy / ".mutation-recheck.log")
    return recheck(mod, copy, _test_cmd(target),
                   _env(target, copy, FACTOR * MPI_TEST_TIMEOUT_S),
                   (base, "the unmutated tests run again before the rerun"))


def collect(target: Target, copy: Path, run: dict[str, Any]) -> dict[str, Any]:
    """The raw entry of a target from mutmut's cache in ``copy`` and the run's own facts."""
    mutants = _statuses(copy)
    count = {s: sum(m["status"] == s for m in mutants) for s in
             ("ok_killed", "bad_survived", "bad_timeout", "ok_suspicious", "skipped", "untested")}
    survivors, source = [], (copy / target.path).read_text()
    for m in mutants:
        if m["status"] in ("bad_survived", "bad_timeout", "ok_suspicious"):
            old, new = _diff(source, m)
            why = EQUIVALENT.get((target.name, old, new))
            survivors.append({"line": m["line"], "status": m["status"], "before": old,
                              "after": new, "equivalent": why})
    untested = [m["line"] for m in mutants if m["status"] in ("skipped", "untested")]
    rec = MutationRecord.from_dict({
        **asdict(target), "tool": TOOL, "runner": _runner(target), **run,
        "mutants": len(mutants), "killed": count["ok_killed"],
        "survived": count["bad_survived"], "timed_out": count["bad_timeout"],
        "suspicious": count["ok_suspicious"], "untested": len(untested),
        "untested_lines": untested, "survivors": survivors}, where=f"module {target.name}")
    return rec.to_dict()



def copy_checkout(root: Path, dest: Path) -> None:
    """The checkout at ``root``: its tracked and untracked (not ignored) files, into ``dest``."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, names):
        src, dst = root / name, dest / name
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the worktree, not yet in git
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, dst)
