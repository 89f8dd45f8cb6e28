"""Parsing Horovod 0.28.1's timeline and autotune log (files written by real np=2 runs here),
and one clear error naming the file when either is malformed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hvdscale.records.autotune_log import read_autotune_log
from hvdscale.records.timeline import TimelineError, summarize_timeline

DATA = Path(__file__).resolve().parents[1] / "data"
TIMELINE = DATA / "timeline_hooks_0.28.1.json"  # demo.yaml, hooks, 128 MiB, 3 steps
AUTOTUNE = DATA / "autotune_0.28.1.csv"  # HOROVOD_AUTOTUNE_LOG of a finished tuning run
DEMO_GRAD_BYTES = 2719552  # demo.yaml's 679888 float32 parameters


def test_real_timeline_summary_per_step() -> None:
    s = summarize_timeline(TIMELINE)
    assert len(s["steps"]) == 3  # one per token-count allreduce
    assert s["allreduce_ops"] == ["MPI_ALLREDUCE"]
    assert s["gradient_tensors"] == 16
    for step in s["steps"]:
        # Every gradient is reduced exactly once per step, whatever the fusion.
        assert sum(step["buffer_bytes"]) == DEMO_GRAD_BYTES
        assert sum(step["tensors_per_buffer"]) == 16
        assert step["fused_buffers"] == len(step["buffer_bytes"]) >= 2
        assert step["phases_ms"]["ALLREDUCE_OP"] > 0
        assert step["phases_ms"]["MEMCPY_IN_FUSION_BUFFER"] > 0  # multi-tensor buffers
    assert s["buffers"]["max_tensors"] > 1
    assert s["cycles"]["count"] > 10


def _ev(ph: str, pid: int, ts: float, name: str = "", **kw: object) -> dict:
    e = {"ph": ph, "pid": pid, "ts": ts, **kw}
    if name:
        e["name"] = name
    return e


def _synthetic(tmp_path: Path) -> Path:
    """Three gradient tensors: a and b fused into one buffer, then c alone."""
    ev: list[dict] = [{"name": "process_name", "ph": "M", "pid": 0,
                       "args": {"start_time_since_epoch_in_micros": 1_000_000}}]
    for pid, name in ((1, "allreduce.a"), (2, "allreduce.b"), (3, "allreduce.c")):
        ev.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}})
    for pid in (1, 2):
        ev += [_ev("B", pid, 100, "NEGOTIATE_ALLREDUCE"), _ev("E", pid, 110),
               _ev("B", pid, 120, "ALLREDUCE"), _ev("B", pid, 121, "MEMCPY_IN_FUSION_BUFFER")]
    ev += [_ev("E", 1, 130), _ev("E", 2, 130)]
    ev += [_ev("B", 1, 131, "MPI_ALLREDUCE"), _ev("B", 2, 131.5, "MPI_ALLREDUCE"),
           _ev("E", 1, 200), _ev("E", 2, 200)]
    for pid, shape in ((1, "[10, 4]"), (2, "[6]")):
        ev.append(_ev("E", pid, 210, args={"dtype": "float32", "shape": shape}))
    ev += [_ev("B", 3, 300, "ALLREDUCE"), _ev("B", 3, 301, "MPI_ALLREDUCE"), _ev("E", 3, 400),
           _ev("E", 3, 401, args={"dtype": "float64", "shape": "[5]"})]
    p = tmp_path / "t.json"
    p.write_text(json.dumps(ev))
    return p


def test_fused_buffers_and_overlap_with_backward(tmp_path: Path) -> None:
    p = _synthetic(tmp_path)
    # One step from t=0 to t=1000 us; backward from 50 to 150 us (epoch seconds below).
    mark = {k: (1_000_000 + us) / 1e6 for k, us in
            (("start", 0), ("backward_start", 50), ("backward_end", 150), ("end", 1000))}
    (step,) = summarize_timeline(p, [mark])["steps"]
    assert step["fused_buffers"] == 2
    assert step["buffer_bytes"] == [(40 + 6) * 4, 5 * 8]
    assert step["tensors_per_buffer"] == [2, 1]
    assert step["allreduce_ms"] == pytest.approx((69 + 99) / 1e3)
    assert step["allreduce_during_backward_ms"] == pytest.approx(19 / 1e3)  # 131..150
    assert step["wait_after_backward_ms"] == pytest.approx(250 / 1e3)  # 150..400
    assert step["phases_ms"]["MEMCPY_IN_FUSION_BUFFER"] == pytest.approx(9 / 1e3)


@pytest.mark.parametrize("text,why", [
    ('[{"ph": "B", "pid": 1, "ts": 5, "name": "ALLREDUCE"}, {"ph": "E"', "not valid JSON"),
    ('{"ph": "B"}', "expected a JSON list"),
    ('[{"ph": "B", "pid": 1, "ts": 5, "name": "A"}, {"ph": "E", "pid": 1, "ts": 6}, '
     '{"ph": "E", "pid": 1, "ts": 7}]', "has no matching begin"),
    ('[{"ph": "B", "pid": "x", "ts": 5, "name": "A"}]', "bad event field"),
    ("", "is empty"),
])
def test_malformed_timeline_is_one_error_naming_the_file(tmp_path: Path, text: str,
                                                          why: str) -> None:
    p = tmp_path / "broken timeline.json"
    p.write_text(text)
    with pytest.raises(TimelineError) as e:
        summarize_timeline(p)
    assert str(p) in str(e.value) and why in str(e.value)


def test_real_autotune_log() -> None:
    log = read_autotune_log(AUTOTUNE)
    assert log["finished"] is True
    assert len(log["trials"]) == 5
    assert log["chosen"]["cycle_time_ms"] == pytest.approx(41.9938)
    assert log["chosen"]["fusion_threshold_mb"] == pytest.approx(40.0138)
    assert log["chosen"]["score"] == max(t["score"] for t in log["trials"])


def test_unfinished_autotune_log_takes_the_last_trial(tmp_path: Path) -> None:
    p = tmp_path / "a.csv"
    p.write_text("\n".join(AUTOTUNE.read_text().splitlines()[:-1]) + "\n")
    log = read_autotune_log(p)
    assert log["finished"] is False and len(log["trials"]) == 5
    assert log["chosen"] == log["trials"][-1]


@pytest.mark.parametrize("text,why", [
    ("a,b,c\n1,2,3\n", "header"),
    (AUTOTUNE.read_text().splitlines()[0] + "\n0,0,0, 1,five,4,0.5\n", "not all numbers"),
    (AUTOTUNE.read_text().splitlines()[0] + "\n0,0,0,1,5\n", "has 5 fields"),
    (AUTOTUNE.read_text().splitlines()[0] + "\n", "no trial"),
    ("", "is empty"),
])
def test_malformed_autotune_log_is_one_error_naming_the_file(tmp_path: Path, text: str,
                                                             why: str) -> None:
    p = tmp_path / "tune.csv"
    p.write_text(text)
    with pytest.raises(TimelineError) as e:
        read_autotune_log(p)
    assert str(p) in str(e.value) and why in str(e.value)


@pytest.mark.parametrize("args,content", [([], "[{"), (["--autotune"], "x,y\n")])
def test_cli_reports_malformed_file_once_without_traceback(tmp_path: Path, args: list[str],
                                                           content: str) -> None:
    p = tmp_path / "bad.file"
    p.write_text(content)
    r = subprocess.run([sys.executable, "-m", "hvdscale", "timeline", str(p), *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(p) in lines[0] and "malformed" in lines[0]
    assert "Traceback" not in r.stderr
