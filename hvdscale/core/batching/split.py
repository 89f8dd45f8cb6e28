"""The global split: one global batch cut into per-rank parts with balanced padded slots.

A pure function of the sentence lengths (``GlobalPlan`` in ``hvdscale.core.batching.plan``
applies it at every step of ``data.bucketing.mode=global``).
"""

from __future__ import annotations

import numpy as np


def split_by_slots(lengths: np.ndarray, idx: np.ndarray, parts: int) -> list[np.ndarray]:
    """Split one global batch into ``parts`` contiguous length ranges with balanced padded slots.

    The sentences are sorted longest first and cut into consecutive runs; a run padded to its
    longest sentence costs (sentences x its first length) slots. The cut minimises the largest
    run's slots (a synchronous step lasts as long as its slowest rank): binary search on the
    cap, each run taking as many sentences as fit under it. Contiguous runs rather than dealing
    sentences out one by one: each run then spans the narrowest length range, so a part's
    padded slots are close to its real tokens and its time steps (its longest sentence) are as
    few as they can be; balanced slots are then balanced work for a padded loop and for a
    packed kernel alike. While sentences remain, every part gets at least one (an idle rank
    helps nobody); with fewer sentences than parts the last parts are empty.

    Args:
        lengths: every sentence's length (indexed by sentence).
        idx: the global batch's sentences.
        parts: how many parts (ranks).

    Returns:
        ``parts`` index arrays, longest sentences first; empty arrays where there is nothing.
    """
    order = idx[np.argsort(-lengths[idx], kind="stable")]
    lens = lengths[order]
    n = len(order)
    if n == 0:
        return [order[:0] for _ in range(parts)]

    def runs_needed(cap: int) -> int:
        i = runs = 0
        while i < n:
            i += max(1, cap // int(lens[i]))
            runs += 1
        return runs

    lo, hi = int(lens[0]), int(lens[0]) * n  # one sentence per run .. everything in one run
    while lo < hi:
        mid = (lo + hi) // 2
        if runs_needed(mid) <= parts:
            hi = mid
        else:
            lo = mid + 1
    out, i = [], 0
    for r in range(parts):
        left, later = n - i, parts - r - 1
        take = max(1, lo // int(lens[i])) if left else 0
        if left:
            take = min(take, max(1, left - later))
        out.append(order[i : i + take])
        i += take
    return out
