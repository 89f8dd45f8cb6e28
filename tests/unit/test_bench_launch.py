"""The benches stand on the package (issue 42): a bench point and a sweep point of the same
config share their launch line and launcher environment; every bench script starts and parses
``--help``; no bench builds its own MPI launch, reads ``results.jsonl`` by hand, reads a record
field by its key instead of as the typed record's attribute, edits ``sys.path`` or imports
another bench or the tests."""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hvdscale.core.threads import export_threads
from hvdscale.records.failed import FailedRecord
from hvdscale.records.run import RunRecord
from hvdscale.study.sweep.driver import launch_command
from hvdscale.study.sweep.launcher import launch_env
from hvdscale.study.sweep.one_run import single_run_line
from hvdscale.study.sweep.plan import SweepRequest, plan_sweep

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
CONFIG = ROOT / "configs" / "demo.yaml"
SCRIPTS = sorted(BENCH.glob("bench_*.py"))
# Every script of bench/ (the experiments and their helpers) and of evidence/ (the device
# evidence pipeline) must pass every rule. The project's checks in tools/ launch no run: they
# read raw result files by name, and the mutation harness hands mutmut a shell command that runs
# the tests under mpirun.
HELD = ("bench", "evidence")
HELD_PY = sorted(str(p.relative_to(ROOT)) for d in HELD for p in (ROOT / d).glob("*.py"))
RECORDS_NOT_YET: set[str] = set()
"""Scripts that still read their records by key (none left)."""
LAUNCHER = [sys.executable, "-m", "hvdscale.study.sweep.launcher"]
OWN_LAUNCH = {"-np", "OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
              "OMPI_COMM_WORLD_LOCAL_SIZE", "results.jsonl"}
"""Strings a script holds only when it builds its own mpirun line or MPI environment, or reads
the records file by hand."""


def test_a_bench_point_and_a_sweep_point_share_their_launch(tmp_path: Path) -> None:
    out = tmp_path / "out"
    spec = plan_sweep(SweepRequest(CONFIG, "2", "horovod", out=out), check_out=False)
    point = spec.points[0]
    cmd, env = single_run_line(2, CONFIG, out, [f"framework={point.cfg.framework}",
                                                "strategy.name=horovod"])
    assert cmd == launch_command(spec, point)
    assert cmd[:7] == ["mpirun", "-np", "2", "--bind-to", "none", "--map-by", "slot"]
    assert env == launch_env()  # what the sweep's run_point launches under


def test_a_shell_launch_of_a_bench_is_the_sweeps_line(tmp_path: Path) -> None:
    # What bench/run_all.sh starts its MPI benches with, against a sweep point's own line.
    program = ["python", "bench/bench_overhead.py", "--rounds", "16"]
    r = subprocess.run([*LAUNCHER, "--print", "--np", "2", "--", *program], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    line = shlex.split(r.stdout)
    spec = plan_sweep(SweepRequest(CONFIG, "2", "horovod", out=tmp_path), check_out=False)
    sweep_line = launch_command(spec, spec.points[0])
    sweep_prefix = sweep_line[:sweep_line.index(sys.executable)]
    assert line == [*sweep_prefix, *program]
    assert line[:7] == ["mpirun", "-np", "2", "--bind-to", "none", "--map-by", "slot"]


@pytest.mark.parametrize("argv", [["--np", "0", "--", "python", "x.py"], ["--np", "2"],
                                  ["--np", "2", "--launcher", "pbs", "--", "x"]])
def test_a_bad_shell_launch_is_one_clear_line(argv: list[str]) -> None:
    r = subprocess.run([*LAUNCHER, *argv], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("hvdscale: error: ")


def test_no_bench_shell_script_writes_its_own_mpirun_line() -> None:
    mpirun = re.compile(r"(^|[\s;&|(])mpirun\s")
    found = [f"{sh.name}:{n}" for d in HELD for sh in sorted((ROOT / d).glob("*.sh"))
             for n, line in enumerate(sh.read_text().splitlines(), 1)
             if mpirun.search(line.split("#", 1)[0])]
    assert found == []
    assert "hvdscale.study.sweep.launcher" in (BENCH / "run_all.sh").read_text()


def test_extra_env_reaches_the_ranks_and_the_launcher() -> None:
    cmd, env = single_run_line(2, CONFIG, "out", ["measure.steps=3"], quiet=True,
                               launcher_args=("--oversubscribe",),
                               env={"PYTHONPATH": "/elsewhere", "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert env["PYTHONPATH"] == "/elsewhere" and env["TF_CPP_MIN_LOG_LEVEL"] == "2"
    assert cmd[cmd.index("PYTHONPATH") - 1] == "-x"  # forwarded to every rank
    assert cmd.index("--oversubscribe") < cmd.index(sys.executable)
    assert cmd[cmd.index(sys.executable):] == [sys.executable, "-m", "hvdscale", "run",
                                               str(CONFIG), "--set", "measure.steps=3",
                                               "--quiet", "--out", "out"]


def test_every_bench_script_parses_help() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}

    def helps(script: Path) -> tuple[str, int, str]:
        r = subprocess.run([sys.executable, str(script.relative_to(ROOT)), "--help"], cwd=ROOT,
                           env=env, capture_output=True, text=True, timeout=120)
        return script.name, r.returncode, r.stdout[:200] + r.stderr[-500:]

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(helps, SCRIPTS))
    bad = [(name, rc, text) for name, rc, text in results if rc != 0 or "usage:" not in text]
    assert len(results) >= 20 and not bad


def _rules_broken(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in OWN_LAUNCH:
            found.append(f"builds its own launch or reads records by hand ({node.value!r})")
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names]
            for name in names:
                if name.startswith(("bench_", "tests.", "tests")):
                    found.append(f"imports {name}")
        elif (isinstance(node, ast.Attribute) and node.attr in ("insert", "append")
              and isinstance(node.value, ast.Attribute) and node.value.attr == "path"):
            found.append("edits sys.path")
    return found


@pytest.mark.parametrize("name", HELD_PY)
def test_bench_stands_on_the_package(name: str) -> None:
    assert _rules_broken(ROOT / name) == []


def _record_fields() -> set[str]:
    """The fields of the records a results directory holds (a run's, a failed point's): read
    as the typed record's attributes, never by key."""
    return {f for kind in (RunRecord, FailedRecord) for f in kind.field_names()}


def _keyed(node: ast.AST) -> tuple[ast.AST | None, ast.AST | None]:
    """(object, key) of ``obj[key]`` or ``obj.get(key, ...)``; (None, None) otherwise."""
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        return node.value, node.slice
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get" and node.args):
        return node.func.value, node.args[0]
    return None, None


def _from_reader(node: ast.AST) -> bool:
    """``launch_run(...)``, ``read_out(...)`` or ``read_records(...)``, indexed or not."""
    node = node.value if isinstance(node, ast.Subscript) else node
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("launch_run", "read_out", "read_records"))


def _record_scopes(tree: ast.Module) -> list[tuple[ast.AST, set[str]]]:
    """Where a name holds a record: in a function (or the module's own statements) ``rec``,
    ``record`` and what a reader's result is assigned or looped into; in a comprehension, the
    targets of its readers."""
    top = ast.Module([n for n in tree.body if not isinstance(n, ast.FunctionDef | ast.ClassDef)],
                     [])
    scopes = []
    for scope in [*(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), top]:
        names = {"rec", "record"}
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign) and _from_reader(node.value):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif (isinstance(node, ast.For) and _from_reader(node.iter)
                  and isinstance(node.target, ast.Name)):
                names.add(node.target.id)
        scopes.append((scope, names))
    for comp in ast.walk(tree):
        if isinstance(comp, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            scopes.append((comp, {g.target.id for g in comp.generators
                                  if _from_reader(g.iter) and isinstance(g.target, ast.Name)}))
    return scopes


def raw_record_reads(path: Path, fields: set[str]) -> list[str]:
    """``line: field`` of each record field read by its key instead of as an attribute."""
    found = set()
    for scope, names in _record_scopes(ast.parse(path.read_text())):
        for node in ast.walk(scope):
            obj, key = _keyed(node)
            if (isinstance(obj, ast.Name) and obj.id in names and isinstance(key, ast.Constant)
                    and key.value in fields):
                found.add(f"{node.lineno}: {key.value}")
    return sorted(found)


@pytest.mark.parametrize("name", [n for n in HELD_PY if n not in RECORDS_NOT_YET])
def test_bench_reads_records_through_their_attributes(name: str) -> None:
    fields = _record_fields()
    assert {"words_per_s", "step_time", "config", "status"} <= fields
    assert raw_record_reads(ROOT / name, fields) == []


def test_thread_settings_keep_a_users_mpi_yield(monkeypatch: pytest.MonkeyPatch) -> None:
    # A launcher other than Open MPI's (MPICH's local size), and a user's explicit choice.
    monkeypatch.delenv("OMPI_COMM_WORLD_LOCAL_SIZE", raising=False)
    monkeypatch.setenv("MPI_LOCALNRANKS", "64")
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "0")
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "TF_NUM_INTRAOP_THREADS"):
        monkeypatch.delenv(var, raising=False)
    assert export_threads(0, 0, "auto") == (1, 0)  # 64 local ranks share this host's cores
    assert os.environ["OMPI_MCA_mpi_yield_when_idle"] == "0"
    assert os.environ["OMP_NUM_THREADS"] == "1"
    export_threads(1, 0, "on")  # the config's explicit word wins
    assert os.environ["OMPI_MCA_mpi_yield_when_idle"] == "1"
