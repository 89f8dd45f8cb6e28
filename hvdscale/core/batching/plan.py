"""Plans: which sentences each rank trains on, batch by batch, epoch after epoch.

A ``BatchPlan`` holds one rank's shard (per-rank sizes from ``data.scaling``; length buckets
from ``buckets``); a ``GlobalPlan`` holds one worker's parts of the job's global batches (the
cut from ``split``). ``make_plan`` picks between them per ``data.bucketing.mode``.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from hvdscale.config import DataConfig
from hvdscale.core.batching.buckets import bucket_batches, bucket_groups
from hvdscale.core.batching.split import split_by_slots
from hvdscale.corpora.corpus import Batch, Corpus, collate
from hvdscale.errors import HvdscaleError


def _share(total: int, rank: int, size: int) -> int:
    """This rank's part of ``total`` split over ``size`` ranks; remainders go to low ranks."""
    base, extra = divmod(total, size)
    return base + (1 if rank < extra else 0)


def per_rank_batch_size(cfg: DataConfig, rank: int, size: int) -> int:
    """Sentences per batch on this rank: weak scaling keeps it; strong divides the global batch."""
    if cfg.scaling == "weak":
        return cfg.batch_size
    n = _share(cfg.batch_size, rank, size)
    if n == 0:
        raise HvdscaleError(f"data.batch_size={cfg.batch_size} (global, strong scaling) leaves "
                            f"rank {rank} of {size} an empty batch")
    return n


def per_rank_token_budget(cfg: DataConfig, rank: int, size: int) -> int:
    """This rank's ``data.bucketing.tokens_per_batch`` (0: batches by sentence count).

    Weak scaling keeps the budget per rank; strong scaling divides the global budget.
    """
    budget = cfg.bucketing.tokens_per_batch
    if cfg.scaling == "weak" or budget == 0:
        return budget
    n = _share(budget, rank, size)
    if n == 0:
        raise HvdscaleError(f"data.bucketing.tokens_per_batch={budget} (global, strong scaling) "
                            f"leaves rank {rank} of {size} no tokens")
    return n


class BatchPlan:
    """This rank's batches, epoch after epoch, shuffled with a seed per epoch.

    Args:
        corpus: this rank's sentences.
        cfg: the ``data`` section.
        kind: ``nmt`` or ``lm`` (how sentences become a batch).
        batch_size: this rank's sentences per batch (see ``per_rank_batch_size``).
        rank: this rank's index among the ranks that compute (seeds the shuffles).
        tokens_per_batch: this rank's token budget with bucketing (see
            ``per_rank_token_budget``); None takes ``data.bucketing.tokens_per_batch``.
    """

    def __init__(self, corpus: Corpus, cfg: DataConfig, kind: str, batch_size: int,
                 rank: int, tokens_per_batch: int | None = None) -> None:
        self.corpus = corpus
        self.cfg = cfg
        self.kind = kind
        self.batch_size = batch_size
        self.rank = rank
        self.tokens_per_batch = (cfg.bucketing.tokens_per_batch if tokens_per_batch is None
                                 else tokens_per_batch)
        self.src_lens = np.array([len(s) for s in corpus.src], dtype=np.int64)
        self.tgt_lens = (np.array([len(t) for t in corpus.tgt], dtype=np.int64)
                         if corpus.tgt is not None else None)
        self.max_src = int(self.src_lens.max())
        self.max_tgt = int(self.tgt_lens.max()) if self.tgt_lens is not None else 0
        if len(corpus.src) < batch_size and not cfg.bucketing.enabled:
            raise HvdscaleError(
                f"data.batch_size={batch_size} is larger than the {len(corpus.src)} sentences "
                f"rank {rank} holds")

    def _lengths(self) -> np.ndarray:
        """A sentence's length for bucketing: its longer side."""
        if self.tgt_lens is None:
            return self.src_lens
        return np.maximum(self.src_lens, self.tgt_lens)

    def _order(self, epoch: int) -> tuple[np.ndarray, np.random.Generator]:
        rng = np.random.default_rng([self.cfg.seed, self.rank, epoch, 7])
        n = len(self.corpus.src)
        return (rng.permutation(n) if self.cfg.shuffle else np.arange(n)), rng

    def _plain_batches(self, order: np.ndarray) -> list[np.ndarray]:
        """Consecutive batches of ``batch_size`` sentences; a last partial batch is dropped."""
        n, b = len(order), self.batch_size
        return [order[i : i + b] for i in range(0, n - b + 1, b)]

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        """Index arrays of the batches of one epoch, in training order."""
        order, rng = self._order(epoch)
        if not self.cfg.bucketing.enabled:
            return self._plain_batches(order)
        return bucket_batches(self._lengths(), order, self.cfg.bucketing, self.batch_size, rng,
                              tokens_per_batch=self.tokens_per_batch, shuffle=self.cfg.shuffle)

    def epoch_buckets(self, epoch: int) -> dict[int, list[np.ndarray]]:
        """This epoch's batches grouped by length bucket (bucketing must be enabled)."""
        order, _ = self._order(epoch)
        return bucket_groups(self._lengths(), order, self.cfg.bucketing, self.batch_size,
                             self.tokens_per_batch)

    def epochs(self, n: int, first: int = 0) -> list[np.ndarray]:
        """The batches of epochs ``first`` .. ``first + n - 1``, in training order."""
        return [idx for e in range(first, first + n) for idx in self.epoch_batches(e)]

    def batches(self, first_epoch: int = 0) -> Iterator[Batch]:
        """Endless batches from epoch ``first_epoch`` on; epochs repeat with new shuffles."""
        epoch = first_epoch
        while True:
            for idx in self.epoch_batches(epoch):
                yield self.make(idx)
            epoch += 1

    def slots(self, idx: np.ndarray, pad_to_max: bool) -> tuple[int, int]:
        """(real tokens, token slots incl. padding) of the batch ``make(idx)`` would build,
        counted like ``Batch.words`` and ``Batch.padded_tokens``, without building it."""
        src = self.src_lens[idx]
        if self.tgt_lens is None:  # lm: inputs and targets are the sentence shifted by one
            width = (self.max_src if pad_to_max else int(src.max())) - 1
            return int(src.sum()) - len(idx), len(idx) * width
        tgt = self.tgt_lens[idx] + 1  # BOS/EOS
        s_width = self.max_src if pad_to_max else int(src.max())
        t_width = (self.max_tgt if pad_to_max else int(self.tgt_lens[idx].max())) + 1
        return int(src.sum() + tgt.sum()), len(idx) * (s_width + t_width)

    def padding_profile(self, epoch: int = 0) -> dict[str, dict[str, int]]:
        """Real tokens and token slots of one epoch of this rank's data, batched three ways:
        ``configured`` (this plan: bucketing and ``pad_to`` as set), ``unbucketed`` (batches
        of ``batch_size`` sentences in shuffled order, each padded to its longest sentence)
        and ``pad_to_max`` (the same batches padded to the longest sentence of the corpus)."""
        order, _ = self._order(epoch)
        plain = self._plain_batches(order) or [order]
        variants = {"configured": (self.epoch_batches(epoch), self.cfg.pad_to == "max"),
                    "unbucketed": (plain, False), "pad_to_max": (plain, True)}
        out = {}
        for name, (batches, to_max) in variants.items():
            counts = np.array([self.slots(idx, to_max) for idx in batches]).sum(axis=0)
            out[name] = {"words": int(counts[0]), "slots": int(counts[1])}
        return out

    def make(self, idx: np.ndarray) -> Batch:
        src = [self.corpus.src[i] for i in idx]
        tgt = [self.corpus.tgt[i] for i in idx] if self.corpus.tgt is not None else None
        if self.cfg.pad_to == "max":
            return collate(src, tgt, self.kind, self.max_src, self.max_tgt)
        return collate(src, tgt, self.kind)


# --- global batches split across ranks ----------------------------------------------------------

GLOBAL_SEED_TAG = 13  # the global order's seed: [data.seed, epoch, 13]; no rank in it


class GlobalPlan(BatchPlan):
    """One worker's parts of the job's global batches (``data.bucketing.mode=global``).

    Every worker builds the same global batches from the whole corpus: bucketed to the global
    budget, in an order seeded by ``data.seed`` and the epoch only. Each global batch is split
    by ``split_by_slots``; part ``p`` of the ``j``-th global batch of an epoch goes to worker
    ``(p + j) % num_workers``, so the longest part (and at a bucket's tail the empty ones)
    moves round the ranks instead of always landing on the same one.

    Args:
        corpus: the whole corpus (every worker's sentences).
        cfg: the ``data`` section.
        kind: ``nmt`` or ``lm``.
        batch_size: global sentences per step when there is no token budget.
        worker: this worker's index.
        num_workers: the workers that compute.
        tokens_per_batch: the global token budget per step (0: ``batch_size`` sentences).
    """

    def __init__(self, corpus: Corpus, cfg: DataConfig, kind: str, batch_size: int,
                 worker: int, num_workers: int, tokens_per_batch: int) -> None:
        super().__init__(corpus, cfg, kind, batch_size, worker, tokens_per_batch)
        self.num_workers = num_workers
        self.lengths = self._lengths()  # computed once: the split reads it at every step

    def _order(self, epoch: int) -> tuple[np.ndarray, np.random.Generator]:
        rng = np.random.default_rng([self.cfg.seed, epoch, GLOBAL_SEED_TAG])
        n = len(self.corpus.src)
        return (rng.permutation(n) if self.cfg.shuffle else np.arange(n)), rng

    def global_batches(self, epoch: int) -> list[np.ndarray]:
        """The job's global batches of one epoch, in training order (the same on every rank)."""
        return BatchPlan.epoch_batches(self, epoch)

    def parts(self, gidx: np.ndarray, j: int) -> list[np.ndarray]:
        """Every worker's part of global batch ``gidx``, the ``j``-th of its epoch, by worker."""
        split = split_by_slots(self.lengths, gidx, self.num_workers)
        return [split[(w - j) % self.num_workers] for w in range(self.num_workers)]

    def epoch_steps(self, epoch: int) -> list[np.ndarray | None]:
        """This worker's part of each global batch of one epoch (None: an empty part)."""
        out: list[np.ndarray | None] = []
        for j, gidx in enumerate(self.global_batches(epoch)):
            mine = self.parts(gidx, j)[self.rank]
            out.append(mine if len(mine) else None)
        return out

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        """This worker's non-empty parts of one epoch, in training order."""
        return [idx for idx in self.epoch_steps(epoch) if idx is not None]

    def _plain_batches(self, order: np.ndarray) -> list[np.ndarray]:
        # Unbucketed comparison: global batches of batch_size sentences, split evenly by count.
        return [part for g in BatchPlan._plain_batches(self, order)
                if len(part := np.array_split(g, self.num_workers)[self.rank])]

    def steps(self, first_epoch: int = 0) -> Iterator[Batch | None]:
        """Endless: this worker's batch (None: empty part) of every global batch, from epoch
        ``first_epoch`` on."""
        epoch = first_epoch
        while True:
            for idx in self.epoch_steps(epoch):
                yield None if idx is None else self.make(idx)
            epoch += 1

    def digest(self, epochs: int) -> tuple[int, int]:
        """(global batches, a checksum of their sentences) over ``max(epochs, 1)`` epochs: equal
        on every rank unless their corpora differ."""
        batches = [g for e in range(max(epochs, 1)) for g in self.global_batches(e)]
        lengths = self.lengths
        check = sum((k + 1) * (int(g.sum()) * 7919 + int(lengths[g].sum()))
                    for k, g in enumerate(batches))
        return len(batches), check % (1 << 61)


def make_plan(corpus: Corpus, cfg: DataConfig, kind: str, worker: int,
              num_workers: int) -> BatchPlan:
    """The plan of worker ``worker`` of ``num_workers``, its batch split per ``data.scaling``
    (with ``data.bucketing.mode=global``: a ``GlobalPlan`` over the whole corpus)."""
    if cfg.bucketing.enabled and cfg.bucketing.mode == "global":
        weak = cfg.scaling == "weak"
        return GlobalPlan(corpus, cfg, kind, cfg.batch_size * (num_workers if weak else 1),
                          worker, num_workers,
                          cfg.bucketing.tokens_per_batch * (num_workers if weak else 1))
    return BatchPlan(corpus, cfg, kind, per_rank_batch_size(cfg, worker, num_workers), worker,
                     per_rank_token_budget(cfg, worker, num_workers))
