"""The mapped NMT source: the target is a function of the source (floor zero) and the lengths
keep the configured long-tailed distribution."""

from __future__ import annotations

import numpy as np

from hvdscale.config import DataConfig, SyntheticConfig
from hvdscale.corpora.corpus import make_synthetic
from hvdscale.corpora.evalset import make_eval_set
from hvdscale.corpora.synth_nmt import map_sentence, substitution_table


def test_substitution_then_reversal_of_each_clause() -> None:
    table = substitution_table(20, 30, seed=1)
    src = np.array([5, 6, 4, 7, 8, 9])  # 4 separates two clauses
    assert map_sentence(src, table).tolist() == [table[6], table[5], 4, table[9], table[8],
                                                 table[7]]
    assert len(set(table[5:].tolist())) == 15  # injective when the target vocabulary allows


def test_target_is_a_function_of_the_source_with_long_tailed_lengths() -> None:
    syn = SyntheticConfig(kind="mapped", sentences_per_rank=3000, mean_len=20, max_len=100)
    a = make_synthetic(syn, "nmt", 50, 60, seed=1, rank=0)
    b = make_synthetic(syn, "nmt", 50, 60, seed=1, rank=1)
    table = substitution_table(50, 60, seed=1)
    assert a.tgt is not None and b.tgt is not None
    for s, t in zip(a.src + b.src, a.tgt + b.tgt, strict=True):
        assert np.array_equal(t, map_sentence(s, table))  # the same function on every rank
    lens = np.array([len(s) for s in a.src])
    assert np.median(lens) < lens.mean() < np.percentile(lens, 90)  # a right (long) tail
    assert lens.max() > 2.5 * np.median(lens)
    ev = make_eval_set(DataConfig(synthetic=syn), "nmt", 50, 60, 64)
    assert ev.floor_loss == 0.0
