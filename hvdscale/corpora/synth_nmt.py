"""A learnable synthetic NMT source: the target is a fixed, seeded function of the source, so
the best achievable loss is zero.

Sources are uniform tokens with a clause separator (the first real token id) at random places.
The target maps every source token through a seeded substitution table into the target
vocabulary, then reverses each clause (the tokens between separators) in place; the separator
maps to the first real target id and stays where it is. Target length equals source length, so
the sentences keep the configured long-tailed length distribution (``tgt_len_ratio`` is unused).
"""

from __future__ import annotations

import numpy as np

_TABLE_SALT = 0x6D6170  # the table's random stream, apart from the sentences'
SEPARATOR_RATE = 0.1
"""Chance that a source position is a clause separator (clauses of about 10 tokens)."""


def substitution_table(src_vocab: int, tgt_vocab: int, seed: int, first_id: int = 4) -> np.ndarray:
    """``table[src_id]`` is the target id of a source id (specials map to themselves, the
    separator to the first real target id, other tokens to seeded real target ids)."""
    rng = np.random.default_rng([seed, _TABLE_SALT])
    table = np.arange(src_vocab, dtype=np.int64)
    real_tgt = tgt_vocab - first_id - 1  # real target ids other than the separator's
    words = src_vocab - first_id - 1
    if real_tgt >= words:  # injective where the target vocabulary allows it
        table[first_id + 1:] = first_id + 1 + rng.permutation(real_tgt)[:words]
    else:
        table[first_id + 1:] = first_id + 1 + rng.integers(0, real_tgt, size=words)
    table[first_id] = first_id
    return table


def map_sentence(src: np.ndarray, table: np.ndarray, first_id: int = 4) -> np.ndarray:
    """The target of one source sentence: substituted, each clause reversed."""
    out = table[src]
    cuts = np.flatnonzero(src == first_id)
    start = 0
    for end in [*cuts.tolist(), len(src)]:
        out[start:end] = out[start:end][::-1]
        start = end + 1
    return out


def make_pairs(lengths: np.ndarray, src_vocab: int, table: np.ndarray,
               rng: np.random.Generator, first_id: int = 4) -> tuple[list[np.ndarray],
                                                                      list[np.ndarray]]:
    """Source sentences of the given lengths and their mapped targets."""
    src = []
    for k in lengths:
        s = rng.integers(first_id + 1, src_vocab, size=int(k))
        s[rng.random(int(k)) < SEPARATOR_RATE] = first_id
        src.append(s)
    return src, [map_sentence(s, table, first_id) for s in src]
