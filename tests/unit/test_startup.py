"""Start-up in the record: the rank's clock (hvdscale.core.startup), the record's summary
(hvdscale.records.startup), the report's table and the sweep's own time between points."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from hvdscale.core.startup import PHASES, StartupClock, process_start
from hvdscale.records.startup import summarize_startup
from hvdscale.study.report.startup import startup_section
from hvdscale.study.sweep.timing import TIMING_FILE, LaunchTiming, write_timing
from tests.records_fixture import failed_record, run_record

ROOT = Path(__file__).resolve().parents[2]


def test_process_start_is_the_os_start_so_interpreter_start_up_counts() -> None:
    # A child that sleeps before asking: the clock must include the sleep (and the
    # interpreter's start), so it cannot be the time of the first call.
    code = ("import time; time.sleep(0.6); from hvdscale.core.startup import process_start; "
            "print(time.time() - process_start())")
    t0 = time.time()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout
    age, wall = float(out), time.time() - t0
    assert 0.6 <= age <= wall + 0.05, (age, wall)
    assert process_start() <= time.time()


def test_phases_are_the_time_between_marks_and_the_first_step_counts_once() -> None:
    clock = StartupClock()
    clock.start = 100.0
    clock.marks = [("imports", 102.0), ("mpi", 102.5), ("data", 104.0)]
    clock.once("first_step")
    first = clock.marks[-1]
    clock.once("first_step")
    assert clock.marks[-1] == first and len(clock.marks) == 4
    phases = clock.phases()
    assert list(phases) == list(PHASES)
    assert phases["imports"] == 2.0 and phases["mpi"] == 0.5 and phases["data"] == 1.5
    assert phases["horovod"] == 0.0  # never marked: zero, not missing
    e = clock.entry()
    assert e["total_s"] == round(first[1] - 100.0, 4) and e["process_start"] == 100.0


def _entry(start: float, **phases: float) -> dict:
    full = dict.fromkeys(PHASES, 0.0) | phases
    return {"process_start": start, "phases": full, "total_s": sum(full.values())}


def test_the_record_keeps_every_rank_and_the_slowest_per_phase() -> None:
    s = summarize_startup([_entry(10.0, imports=3.0, model=1.0),
                           _entry(9.5, imports=2.0, model=4.0)])
    assert s["max_s"]["imports"] == 3.0 and s["max_s"]["model"] == 4.0
    assert s["total_max_s"] == 6.0 and s["first_process_start"] == 9.5
    assert [r["rank"] for r in s["per_rank"]] == [0, 1]
    assert s["per_rank"][1]["phases"]["model"] == 4.0


def test_the_report_names_the_slow_phase_and_the_sweeps_own_time(tmp_path: Path) -> None:
    rec = run_record("name=demo", ranks=2, key={"series": "torch / fused / ps"},
                     startup=summarize_startup([_entry(1.0, imports=2.0, side_channel=9.0),
                                                _entry(1.0, imports=2.5)]))
    for k in range(3):
        t = LaunchTiming(begin=100.0 * k)
        t.sampled, t.spawned, t.exited = t.begin + 0.25, t.begin + 0.3, t.begin + 50.0
        write_timing(tmp_path, "p", 0, t.entry(None, 100.0 * (k - 1) + 50.0 if k else None))
    md = startup_section([rec, failed_record(ranks=2)], tmp_path)
    row = next(x for x in md.splitlines() if x.startswith("| demo torch / fused / ps | 2 | 1 |"))
    assert "| 11.00 | 2.50 |" in row  # the slowest rank's total, the slowest imports
    assert row.endswith("| side channel and rendezvous (9.00 s) |")
    # between two launches: 50 s after the previous exit, 0.25 sampling, 0.05 preparing
    lines = [json.loads(x) for x in (tmp_path / TIMING_FILE).read_text().splitlines()]
    assert [round(x["between_s"], 2) for x in lines] == [0.3, 50.3, 50.3]
    assert "between points median 50.30 s" in md
    assert startup_section([], tmp_path / "none") == ""


def test_exit_now_runs_atexit_flushes_and_keeps_the_code() -> None:
    code = ("import atexit, sys; atexit.register(lambda: print('bye', end='')); "
            "print('out', end=''); sys.stderr.write('err'); "
            "from hvdscale.core.startup import exit_now; exit_now(3); print('never')")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # buffered, as piped
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env=env)
    assert (r.returncode, r.stdout, r.stderr) == (3, "outbye", "err")
