"""Mutation benchmark (issue 39): can the tests that claim a module fail when it is broken?

A real mutation tool (mutmut, pinned in ``TOOL``) changes the module under test one small edit
at a time (an operator, a constant, a comparison, a call dropped) and runs the tests that claim
it after each edit; a mutant those tests still pass is a survivor. Each target is a module (or
only its named functions, given to mutmut as a patch file of their lines) with its own tests:
fast unit tests where they suffice, ``mpirun -np 2`` where only ranks can tell. Everything runs
in a private scratch copy of the checkout, so the worktree is never mutated.

A survivor is killed by a new test or listed in ``EQUIVALENT`` (old and new line) with one line
saying why no test can tell it apart, or that it changes only what the target's tests do not
claim. Score: detected (killed or timed out) over mutants not so explained; goal 90% a module,
100% for the wire checks and the token-weighted reductions (``Target.full``). ``--only
peers_wire`` runs one target into the raw file, ``--ci`` the CI slice (exit 1 on a survivor),
``--render FILE`` prints a raw file's table.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import mutation_table  # noqa: E402
from mutation_explained import EQUIVALENT  # noqa: E402
from mutation_runner import kill_session  # noqa: E402
from mutation_table import meets_goal, restamp, score  # noqa: E402, F401  (score: the tests')
from scratch import scratch_dir  # noqa: E402

TOOL = "mutmut==2.5.1"
RAW = ROOT / "bench" / "results" / "mutation.json"
TRIES = 3  # mutmut runs a target at most this often when it stops on an error of its own
STALL_S = 900  # no mutant done for this long: mutmut is stuck (a test's own limit is 600 s)
MPI_TEST_TIMEOUT_S = 30
"""The MPI harness's per-test hang limit in a mutant's run (tests/mpi_harness.py; 120 s in CI).
A mutant that deadlocks the ranks (a send without its receive) then fails in 30 s, not 120:
the targets' MPI tests take 1-5 s each at np=2 here, so 30 s is no verdict on a slow test."""


@dataclass(frozen=True)
class Target:
    """One module (or some of its functions) and the tests that claim it."""

    name: str
    path: str
    tests: tuple[str, ...]
    functions: tuple[str, ...] = ()  # "f", "Class.method", "Class.method.inner"; (): all
    np: int = 0  # > 0: the tests run under mpirun -np np
    full: bool = False  # the goal is every non-equivalent mutant killed
    ci: bool = False  # in the CI slice (tests/run.sh phase "mutation-slice")
    ci_tests: tuple[str, ...] = ()  # the slice's tests where fewer suffice (CI's time); (): tests
    others_read: bool = False  # its tests run the copy's code as a second local user


_U, _M = "tests/unit/", "tests/mpi"
TARGETS = (
    Target("peers_wire", "hvdscale/core/peers_wire.py",
           (_U + "test_peers_wire.py", _U + "test_peers_replay.py", _U + "test_peers_hostile.py"),
           full=True, ci=True,
           # test_peers_hostile starts real peers (seconds a mutant); the wire's own tests kill
           # every mutant of the full run without it.
           ci_tests=(_U + "test_peers_wire.py", _U + "test_peers_replay.py")),
    Target("sparse_rows", "hvdscale/strategies/sparse_rows.py",
           (_U + "test_sparse_rows.py", _U + "test_sparse_bytes.py"), full=True),
    Target("noise_scale", "hvdscale/train/noise_scale.py",
           (_U + "test_noise_scale.py", _U + "test_noise_scale_summary.py"),
           functions=("local_sums", "point_from_sums", "b_simple", "NoiseProbe.summary")),
    Target("custom_shapes", "hvdscale/models/custom.py", (_U + "test_shape_mismatch.py",),
           functions=("shape_mismatch",)),
    Target("doctor_network", "hvdscale/doctor/network.py",
           (_U + "test_doctor_named_interface.py", _U + "test_doctor.py"),
           functions=("rendezvous_choice", "check_common", "common_names")),
    Target("lr_rules", "hvdscale/train/lr.py", (_U + "test_lr_rules.py", _U + "test_lr_warmup.py")),
    Target("rendezvous_choice", "hvdscale/core/rendezvous.py", (_U + "test_rendezvous.py",),
           functions=("named_interfaces", "_is_named", "_joins", "_shared_address",
                      "_interface_toward", "_rank0_plan", "job_addresses")),
    Target("peers_addr", "hvdscale/core/peers_addr.py",
           (_U + "test_peers.py", _U + "test_peers_hostile.py"),
           functions=("valid_ipv4", "bind_address")),
    Target("results_store", "hvdscale/records/store.py",
           (_U + "test_shared_results.py", _U + "test_meter_results.py",
            _U + "test_store_limits.py"), others_read=True),
    Target("batching_split", "hvdscale/core/batching/split.py",
           (_U + "test_global_bucketing.py",)),
    Target("lr_warmup", "hvdscale/core/lr_warmup.py", (_U + "test_lr_warmup.py",)),
    # test_until_rules first: each rule at its boundary in milliseconds; test_until's real runs
    # (seconds each) then meet only the mutants those leave.
    Target("until", "hvdscale/train/until.py", (_U + "test_until_rules.py", _U + "test_until.py")),
    Target("bundle_manifest", "launch/bundle_tool.py", (_U + "test_bundle_manifest.py",
           "tests/integration/test_offline_bundle.py", "-k", "manifest"), functions=("check",)),
    Target("horovod_torch_tokens", "hvdscale/frameworks/torch/horovod.py",
           ("tests/mpi/test_exactness.py", "tests/mpi/test_bucketing.py",
            "tests/mpi/test_step_accounting.py", "-k",
            "horovod_equals_one_process_on_union and shipped or average_op or "
            "horovod_uneven_epoch and sum-momentum or horovod_step_marks or "
            "token_request_is_named"),  # sum-momentum: a rank idles
           functions=("HorovodTorch.step",), np=2, full=True),
    # The CI slice's reduction: the loss scale's token weighting alone (a few mutants, one test).
    Target("horovod_torch_scale", "hvdscale/frameworks/torch/horovod.py",
           ("tests/mpi/test_exactness.py", "-k", "average_op"),
           functions=("HorovodTorch.step.scale",), np=2, full=True, ci=True),
    # The sparse exchange's own round (_sparse_exchange) is claimed by the sparse tests (equal
    # to dense, a table split over servers); a bad push, dense or sparse, by the boundaries'.
    Target("ps_tokens", "hvdscale/strategies/param_server.py",
           ("tests/mpi/test_exactness.py", "tests/mpi/test_sparse.py",
            "tests/mpi/test_ps_boundaries.py", "tests/mpi/test_step_accounting.py", "-k",
            "ps_equals_one_process_and_horovod or ps_step_with_one_token or ps_sparse or "
            "ps_bad_push or shorter_dense or bad_token_count or sparse_header or "
            "ps_timings or ps_waits_every"),
           functions=("ParameterServer._exchange", "ParameterServer._sparse_exchange",
                      "ParameterServer.step"), np=2, full=True),
    # test_ddp_phases: what the step tells the watchdog (the phase marks in _step).
    Target("ddp_tokens", "hvdscale/frameworks/torch/ddp.py",
           (_M + "_ddp/test_ddp_exactness.py", _M + "_ddp/test_ddp_phases.py"),
           functions=("DDPStrategy._tokens", "DDPStrategy._step", "DDPStrategy._idle_step"),
           np=2, full=True),
    Target("horovod_tf_tokens", "hvdscale/frameworks/tf/horovod.py",
           ("tests/mpi_tf/test_tf_exactness.py", "tests/mpi_tf/test_tf_token_name.py"),
           functions=("HorovodTF._global_tokens",),
           np=2, full=True),
    # test_mwms_phases: the watchdog's phase and the compute seconds of the step's graph call.
    Target("mwms_tokens", "hvdscale/frameworks/tf/mwms.py",
           (_M + "_mwms/test_mwms_exactness.py", _M + "_mwms/test_mwms_phases.py"),
           functions=("MWMSTF._tokens_fn", "MWMSTF._global_tokens", "MWMSTF.step"),
           np=2, full=True),
)



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


def _copy_checkout(dest: Path) -> None:
    """The checkout's tracked and untracked (not ignored) files, into ``dest``."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, names):
        src, dst = ROOT / name, dest / name
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the worktree, not yet in git
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, dst)


def _runner(target: Target) -> str:
    # Through bench/mutation_runner.py: any failing exit reaches mutmut as 1, and mutmut's
    # time limit kills the tests' every process (mutmut 2.5.1 alone does neither).
    pytest = f"{sys.executable} -m pytest -x -q -p no:cacheprovider --color=no"
    tests = " ".join(f"'{t}'" if " " in t else t for t in target.tests)
    wrap = f"{sys.executable} bench/mutation_runner.py 600"
    if target.np:  # the sweep's own launch line and environment (issue 42: one place builds it)
        launch = f"{sys.executable} -m hvdscale.study.sweep.launcher --np {target.np} --"
        return f"{wrap} {launch} {pytest} {tests}"
    return f"{wrap} {pytest} {tests}"


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
    _copy_checkout(copy)
    env = {**os.environ, "PYTHONPATH": str(copy), "OMP_NUM_THREADS": "1",
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("HVDSCALE_TEST_REPORTS", None)  # a mutant's failing junit files are not CI's
    if target.np:
        env["HVDSCALE_TEST_TIMEOUT"] = str(MPI_TEST_TIMEOUT_S)
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
    return collect(target, copy, {"seconds": seconds, "load_before": load_before,
                                  "load_after": load_after, "tool_error": crash,
                                  "tool_restarts": errors,
                                  "test_timeout_s": MPI_TEST_TIMEOUT_S if target.np else None})


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
    return {**asdict(target), "tool": TOOL, "runner": _runner(target), **run,
            "mutants": len(mutants), "killed": count["ok_killed"],
            "survived": count["bad_survived"], "timed_out": count["bad_timeout"],
            "suspicious": count["ok_suspicious"], "untested": len(untested),
            "untested_lines": untested, "survivors": survivors}


def render(raw: dict[str, Any]) -> str:
    """The per-module table and the survivors, from the raw result alone."""
    return mutation_table.render(raw, [t.name for t in TARGETS])


def _merge(path: Path, mods: list[dict[str, Any]]) -> dict[str, Any]:
    """The raw file with ``mods`` in place of their earlier entries, in TARGETS' order."""
    raw = json.loads(path.read_text()) if path.is_file() else {"tool": TOOL, "modules": []}
    by_name = {m["name"]: m for m in raw["modules"]} | {m["name"]: m for m in mods}
    order = [t.name for t in TARGETS]
    raw["modules"] = sorted(by_name.values(),
                            key=lambda m: order.index(m["name"]) if m["name"] in order else 99)
    raw["tool"] = TOOL
    return raw


def main(argv: list[str] | None = None) -> int:
    """Run the chosen targets (all by default), merge them into the raw file, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="comma-separated target names")
    ap.add_argument("--ci", action="store_true",
                    help="the CI slice; exit 1 when a mutant survives that is not equivalent")
    ap.add_argument("--json", default=str(RAW), help="raw file to merge into ('' : none)")
    ap.add_argument("--work", default=None, help="scratch directory (default: a fresh one)")
    ap.add_argument("--render", default="", help="print the table of a raw file and stop")
    ap.add_argument("--restamp", action="store_true",
                    help="re-read the survivors' reasons from EQUIVALENT into --json and stop")
    args = ap.parse_args(argv)
    if args.render:
        print(render(json.loads(Path(args.render).read_text())), end="")
        return 0
    if args.restamp:
        raw = restamp(json.loads(Path(args.json).read_text()))
        Path(args.json).write_text(json.dumps(raw, indent=1) + "\n")
        return 0
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - {t.name for t in TARGETS})
    if unknown:
        print(f"bench_mutation: no target {', '.join(unknown)}", file=sys.stderr)
        return 2
    if shutil.which("mutmut") is None:
        print(f"bench_mutation: mutmut is not installed (pip install '{TOOL}')", file=sys.stderr)
        return 2
    chosen = [replace(t, tests=t.ci_tests) if args.ci and t.ci_tests else t for t in TARGETS
              if (t.name in names if names else not args.ci or t.ci)]
    work = scratch_dir(args.work, "hvdscale-bench-mutation-")
    mods = []
    try:
        for t in chosen:
            print(f"mutating {t.path} ({', '.join(t.functions) or 'whole module'})",
                  file=sys.stderr, flush=True)
            # 0711: the second user reaches the copy by its name; no one else lists or writes
            work.chmod(0o711 if t.others_read else 0o700)
            mods.append(run_target(t, work))
    finally:
        work.chmod(0o700)
    raw = _merge(Path(args.json), mods) if args.json else {"tool": TOOL, "modules": mods}
    raw["ci"] = args.ci  # the CI slice's file: no "not run yet" for the targets it leaves out
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=1) + "\n")
    print(mutation_table.render({"tool": TOOL, "modules": mods}, []), end="")  # this run's
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    # CI: every mutant tested (a tool crash fails too) and every survivor explained.
    ok = all(meets_goal(m) and not m["untested"] and not m.get("tool_error") for m in mods)
    return 0 if ok or not args.ci else 1


if __name__ == "__main__":
    sys.exit(main())
