"""Whom a waiting rank's message names (hvdscale.core.peers.blame), on crafted answers, and
the phase kind and time in phase a rank answers (hvdscale.core.supervise)."""

from __future__ import annotations

import time
from typing import Any

from hvdscale.core import peers, supervise


def _st(step: int, kind: str, for_s: float = 7.0) -> dict[str, Any]:
    """A rank's answer in a step, as StepWatchdog.state() gives it."""
    return {"phase": f"step {step}", "step": step, "kind": kind, "for_s": for_s,
            "waiting": kind != "compute"}


def test_a_joined_rank_is_not_the_one_the_others_wait_for() -> None:
    # strategy.ddp.idle=join: rank 2 ran out of batches in step 1 and stays there by design.
    answers = {1: _st(3, "communicate"), 2: _st(1, "joined", 90.0)}
    assert peers.blame("step 3", answers, (0, _st(3, "communicate"))) == ""
    # A rank truly behind, waiting in an earlier step, is still named; the joined one is not.
    answers[1] = _st(2, "communicate", 30.0)
    assert peers.blame("step 3", answers) == "it waits for rank 1 (waiting in step 2 for 30s)"


def test_ranks_all_inside_the_combined_call_are_said_to_be_indistinguishable() -> None:
    answers = {1: _st(3, "overlapped", 41.0), 2: _st(3, "communicate")}
    got = peers.blame("step 3", answers, (0, _st(3, "overlapped", 40.0)))
    assert got.startswith("ranks 0,1 are all inside step 3's combined compute+communication "
                          "call"), got
    assert "up to 41s" in got and "cannot be told apart" in got
    # Only a peer inside it (this rank waits elsewhere in the step): still no false culprit.
    got = peers.blame("step 3", {1: _st(3, "overlapped", 41.0)}, (0, _st(3, "communicate")))
    assert got.startswith("rank 1 is inside step 3's combined"), got


def test_a_rank_computing_or_behind_is_named_over_the_combined_call() -> None:
    me = (0, _st(3, "overlapped"))
    # Rank 2 is still in its own compute of the same step: it is the one.
    answers = {1: _st(3, "overlapped"), 2: _st(3, "compute", 12.0)}
    assert peers.blame("step 3", answers, me) == "it waits for rank 2 (busy in step 3 for 12s)"
    # Rank 2 is still in the combined call of an earlier step: it is behind.
    answers[2] = _st(2, "overlapped", 12.0)
    assert peers.blame("step 3", answers, me) == \
        "it waits for rank 2 (computing and communicating (one call) in step 2 for 12s)"


def test_a_rank_answers_the_kind_of_its_phase_and_the_time_since_it_began() -> None:
    where = ["compute"]
    dog = supervise.StepWatchdog(0.0, 0, lambda: where[0])  # 0: no watch thread
    try:
        dog.start_step(3)
        assert dog.state()["kind"] == "compute"
        time.sleep(0.05)  # the step has run a while before its combined call begins
        where[0] = "overlapped"
        st = dog.state()
        assert st["kind"] == "overlapped" and st["waiting"] is True
        # Time in the phase, not in the step: the 0.05 s of compute before it is not counted.
        assert st["step_for_s"] - st["for_s"] >= 0.05, st
    finally:
        dog.stop()
    supervise.phase("gather of the ranks' timings", waiting=True)
    assert supervise.current_state()["kind"] == "communicate"


def test_many_silent_ranks_do_not_hide_the_slow_one() -> None:
    # 256 peers, 200 of them silent (answers lost), rank 250 computing: it is named first, and
    # the silent ranks are cut with an honest count.
    answers: dict[int, Any] = {r: None for r in range(1, 201)}
    answers.update({r: _st(3, "communicate") for r in range(201, 257)})
    answers[250] = _st(3, "compute", 40.0)
    got = peers.blame("step 3", answers, (0, _st(3, "communicate")))
    assert got == ("it waits for rank 250 (busy in step 3 for 40s), ranks 1, 2, 3, 4, 5, 6, 7, "
                   "8 and 192 more (no answer within 2s: stopped, frozen or gone)"), got
