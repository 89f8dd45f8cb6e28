"""Each part of the breakdown (and of the fit's per-step split, the same module) against an
independent computation on crafted records with known compute, idle and communication times:
"rest" is a remainder, so "the parts add up" alone could never fail."""

from __future__ import annotations

import pytest

from hvdscale.study.report import breakdown, decompose

STEPS, WORDS = 10, 1000
C1, G1 = 1e-3, 0.02  # 1-worker compute per word, non-compute seconds per step
COMPUTE = (1.3, 1.45)  # per rank: 0.30 s and 0.45 s above the 1-worker compute
IDLE = (0.15, 0.0)  # rank 0 waits for rank 1
COMM = (0.25, 0.25)  # exposed communication per rank, above g1 per step
WINDOW = 2.0


def _base() -> dict:
    step = WORDS * C1 + STEPS * G1
    return {"status": "ok", "workers": 1, "ranks": 1, "words": WORDS, "window_s": 1.25,
            "words_per_s": WORDS / 1.25, "config": {"x": 1},
            "key": {"name": "t", "model": "nmt", "rnn_impl": "fused", "scaling": "weak",
                    "strategy": "horovod"},
            "rank_times": [{"rank": 0, "words": WORDS, "window_s": 1.25, "steps": STEPS,
                            "step_s": step, "compute_s": WORDS * C1}]}


def _two() -> dict:
    rts, idle = [], []
    for r in range(2):
        step = COMPUTE[r] + IDLE[r] + COMM[r] + STEPS * G1
        rts.append({"rank": r, "words": WORDS, "window_s": WINDOW, "steps": STEPS,
                    "step_s": step, "compute_s": COMPUTE[r]})
        idle.append({"rank": r, "idle_s": IDLE[r]})
    return {**_base(), "workers": 2, "ranks": 2, "words": 2 * WORDS, "window_s": WINDOW,
            "words_per_s": 2 * WORDS / WINDOW, "rank_times": rts,
            "idle": {"steps": STEPS, "per_rank": idle}}


def test_each_part_matches_an_independent_computation() -> None:
    out = breakdown.split_loss(_two(), [_base()])
    w1 = WORDS / 1.25
    # by hand, in points of efficiency (share of the window, mean over the two ranks)
    slow = sum(c - WORDS * C1 for c in COMPUTE) / 2 / WINDOW * 100
    idle = sum(IDLE) / 2 / WINDOW * 100
    comm = sum(COMM) / 2 / WINDOW * 100
    loss = (WINDOW - WORDS / w1) / WINDOW * 100
    assert out["compute_slowdown"] == pytest.approx(slow, abs=1e-9)
    assert out["straggler_idle"] == pytest.approx(idle, abs=1e-9)
    assert out["exposed_comm"] == pytest.approx(comm, abs=1e-9)
    assert out["loss_pct"] == pytest.approx(loss, abs=1e-9)
    assert out["rest"] == pytest.approx(loss - slow - idle - comm, abs=1e-9)
    assert out["efficiency_pct"] == pytest.approx(100 - loss, abs=1e-9)
    assert out["dominant"] == "compute_slowdown"


def test_fit_split_is_the_breakdowns() -> None:
    g1 = decompose.baseline([_base()]).g1
    assert g1 == pytest.approx(G1)
    ps = decompose.per_step(_two(), g1)
    assert ps["comm"] == pytest.approx(sum(COMM) / 2 / STEPS)
    assert ps["idle"] == pytest.approx(sum(IDLE) / 2 / STEPS)
    assert ps["compute"] == pytest.approx(sum(COMPUTE) / 2 / STEPS)
    assert ps["compute"] + ps["idle"] + ps["comm"] + ps["g1"] == pytest.approx(ps["step"])
