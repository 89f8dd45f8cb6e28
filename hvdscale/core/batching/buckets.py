"""Length buckets: boundaries, each sentence's bucket, and batches drawn from one bucket each.

Pure functions of the sentence lengths and the ``data.bucketing`` section; the plans
(``hvdscale.core.batching.plan``) call them once per epoch.
"""

from __future__ import annotations

import numpy as np

from hvdscale.config import BucketConfig


def geometric_boundaries(max_len: int, min_len: int = 8, ratio: float = 1.25) -> list[int]:
    """Bucket upper bounds min_len, x1.25, ... up to max_len (as in common NMT toolkits)."""
    bounds, b = [], float(min_len)
    while b < max_len:
        bounds.append(int(b))
        b = max(b * ratio, b + 1)
    bounds.append(max_len)
    return sorted(set(bounds))


def bucket_batches(lengths: np.ndarray, order: np.ndarray, cfg: BucketConfig, batch_size: int,
                   rng: np.random.Generator, tokens_per_batch: int | None = None,
                   shuffle: bool = True) -> list[np.ndarray]:
    """Batches of sentences from one length bucket each, shuffled across buckets.

    With a token budget a batch grows while (sentences x longest length) fits it, so batches
    of short sentences hold more of them; otherwise ``batch_size`` sentences. A bucket's last
    partial batch is kept: real corpora rarely fill buckets evenly.

    Args:
        lengths: every sentence's length (indexed by sentence).
        order: the sentences of this epoch in visiting order (shuffled or not).
        cfg: the ``data.bucketing`` section (boundaries).
        batch_size: sentences per batch when there is no token budget.
        rng: this epoch's generator; shuffles the batches across buckets.
        tokens_per_batch: the token budget; None takes ``cfg.tokens_per_batch`` (0: none).
        shuffle: False keeps the batches in bucket order (``data.shuffle=false``).
    """
    groups = bucket_groups(lengths, order, cfg, batch_size, tokens_per_batch)
    batches = [idx for b in sorted(groups) for idx in groups[b]]
    if not shuffle:
        return batches
    perm = rng.permutation(len(batches))
    return [batches[i] for i in perm]


def bucket_ids(lengths: np.ndarray, cfg: BucketConfig) -> np.ndarray:
    """Each sentence's bucket: how many boundaries lie below its length.

    The default geometric bounds are one series capped at the longest sentence; the cap never
    lies below a length, so a length gets the same bucket on every rank whatever its longest.
    """
    bounds = list(cfg.boundaries) or geometric_boundaries(int(lengths.max()))
    return np.searchsorted(np.array(bounds), lengths, side="left")


def bucket_groups(lengths: np.ndarray, order: np.ndarray, cfg: BucketConfig, batch_size: int,
                  tokens_per_batch: int | None = None) -> dict[int, list[np.ndarray]]:
    """The batches of each length bucket, in ``order`` within the bucket (see
    ``bucket_batches`` for the arguments)."""
    budget = cfg.tokens_per_batch if tokens_per_batch is None else tokens_per_batch
    bucket_of = bucket_ids(lengths, cfg)[order]
    groups: dict[int, list[np.ndarray]] = {}
    for b in np.unique(bucket_of).tolist():
        members = order[bucket_of == b]
        batches = groups[int(b)] = []
        if budget:
            cur: list[int] = []
            longest = 0
            for i in members:
                new_longest = max(longest, int(lengths[i]))
                if cur and new_longest * (len(cur) + 1) > budget:
                    batches.append(np.array(cur))
                    cur, new_longest = [], int(lengths[i])
                cur.append(int(i))
                longest = new_longest
            if cur:
                batches.append(np.array(cur))
        else:
            batches.extend(members[i : i + batch_size] for i in range(0, len(members), batch_size))
    return groups
