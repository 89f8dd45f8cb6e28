"""Common random numbers (hvdscale.study.verdict.crn): blocks of two runs paired by the batches
they trained on, checked to be the same batches, and the variance they share cancelled."""

from __future__ import annotations

import numpy as np
import pytest

from hvdscale.records.sections import Raw
from hvdscale.study.verdict.crn import block_rates, block_ratio, same_batches


class _Rec:
    def __init__(self, step_s: list[list[float]], words: list[list[int]]) -> None:
        zeros = [[0.0] * len(s) for s in step_s]
        self.raw = Raw(ranks=list(range(len(step_s))), step_s=step_s, compute_s=zeros,
                       words=words, warmup_s=[[] for _ in step_s])


def _pair(shared_sd: float, own_sd: float, seed: int = 1) -> tuple[_Rec, _Rec]:
    """Two 2-rank runs over the same 200 steps: A 10 % faster; a per-step factor both share
    (the sentences) and one each (the process)."""
    rng = np.random.default_rng(seed)
    words = rng.integers(800, 1200, size=(2, 200)).tolist()
    shared = np.exp(rng.normal(0, shared_sd, 200))

    def run(speed: float) -> _Rec:
        own = np.exp(rng.normal(0, own_sd, (2, 200)))
        t = np.asarray(words) / 1e5 / speed * shared * own
        return _Rec(t.round(6).tolist(), words)

    return run(1.1), run(1.0)


def test_blocks_sum_words_over_ranks_and_take_the_slowest_ranks_time() -> None:
    rec = _Rec([[1.0, 2.0, 3.0, 9.0], [2.0, 2.0, 1.0, 1.0]], [[1, 2, 3, 4], [10, 20, 30, 40]])
    w, t = block_rates(rec, 2)
    assert w.tolist() == [33.0, 77.0] and t.tolist() == [4.0, 12.0]
    w, t = block_rates(rec, 3)  # the partial last block is left out
    assert w.tolist() == [66.0] and t.tolist() == [6.0]


def test_pairing_cancels_the_variance_both_runs_share() -> None:
    a, b = _pair(shared_sd=0.10, own_sd=0.01)
    r = block_ratio(a, b, 10)
    assert r.blocks == 20 and r.ratio == pytest.approx(1.1, rel=0.01)
    assert r.width_gain > 3  # the shared factor leaves the paired log ratios, not the unpaired
    a, b = _pair(shared_sd=0.0, own_sd=0.05)
    assert 0.6 < block_ratio(a, b, 10).width_gain < 1.6  # nothing shared: nothing bought


def test_runs_of_other_batches_are_not_paired() -> None:
    a, b = _pair(0.1, 0.01)
    other = _Rec(b.raw.step_s, [[w + 1 for w in ws] for ws in b.raw.words])
    assert same_batches(a, b) and not same_batches(a, other)
    with pytest.raises(ValueError, match="did not train on the same batches"):
        block_ratio(a, other, 10)
    with pytest.raises(ValueError, match="2 whole blocks of 100 steps: at least 3"):
        block_ratio(a, b, 100)
