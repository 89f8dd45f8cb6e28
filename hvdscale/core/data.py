"""Sentences and batches: synthetic and text corpora, vocabularies, bucketing, per-rank plans.

Framework-free (numpy only). A sentence pair is two int arrays of token ids; a ``Batch`` is padded
numpy arrays plus the real token counts that the meter and the token-weighted loss use.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hvdscale.config import BucketConfig, DataConfig, SyntheticConfig, TextConfig
from hvdscale.errors import HvdscaleError

PAD, UNK, BOS, EOS = 0, 1, 2, 3
SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")


@dataclass(frozen=True)
class Batch:
    """One rank's batch for one step.

    For ``nmt``: ``src`` [B, S] and ``tgt_in``/``tgt_out`` [B, T] (``tgt_in`` starts with BOS,
    ``tgt_out`` ends with EOS). For ``lm``: ``src`` holds the inputs and ``tgt_out`` the next
    tokens, ``tgt_in`` is None. Padding is ``PAD``; ``*_len`` are real lengths.
    """

    src: np.ndarray
    src_len: np.ndarray
    tgt_in: np.ndarray | None
    tgt_out: np.ndarray
    tgt_len: np.ndarray

    @property
    def sentences(self) -> int:
        return int(self.src.shape[0])

    @property
    def loss_tokens(self) -> int:
        """Real target tokens: what the summed loss is summed over."""
        return int(self.tgt_len.sum())

    @property
    def words(self) -> int:
        """Real (non-padding) tokens processed: source + target for nmt, targets for lm."""
        if self.tgt_in is None:
            return self.loss_tokens
        return int(self.src_len.sum()) + self.loss_tokens

    @property
    def padded_tokens(self) -> int:
        """Token slots including padding, counted like ``words``."""
        if self.tgt_in is None:
            return int(self.tgt_out.size)
        return int(self.src.size + self.tgt_out.size)


# --- vocabulary and corpora --------------------------------------------------------------------

class Vocab:
    """Token <-> id map; ids 0..3 are the special tokens."""

    def __init__(self, tokens: Sequence[str]) -> None:
        self.itos = list(SPECIALS) + [t for t in tokens if t not in SPECIALS]
        self.stoi = {t: i for i, t in enumerate(self.itos)}

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, words: Sequence[str]) -> np.ndarray:
        return np.fromiter((self.stoi.get(w, UNK) for w in words), dtype=np.int64,
                           count=len(words))

    @classmethod
    def build(cls, lines: Sequence[list[str]], max_size: int) -> Vocab:
        """Most frequent tokens first; ties broken alphabetically so every rank agrees."""
        counts = Counter(w for words in lines for w in words)
        ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return cls([w for w, _ in ordered[: max(0, max_size - len(SPECIALS))]])

    @classmethod
    def load(cls, path: str, key: str) -> Vocab:
        p = Path(path)
        if not p.is_file():
            raise HvdscaleError(f"{key}: vocabulary file not found: {p}")
        text = _read_text(p, key, "vocabulary")
        if text is None:
            raise HvdscaleError(f"{key}: vocabulary file {p} is not UTF-8 text")
        return cls([ln.strip() for ln in text.splitlines() if ln.strip()])


def _read_text(p: Path, key: str, what: str, errors: str = "strict") -> str | None:
    """The file's text; None when it is not UTF-8 (with ``errors="strict"``).

    Raises:
        HvdscaleError: the file cannot be read (permissions, an I/O error).
    """
    try:
        return p.read_bytes().decode("utf-8", errors=errors)
    except UnicodeDecodeError:
        return None
    except OSError as e:
        raise HvdscaleError(f"{key}: {what} file {p} cannot be read: {e.strerror or e}") from None


def check_files(cfg: DataConfig, kind: str) -> None:
    """Raise unless every file the data section names exists (checked by the sweep before the
    first launch; the ranks read them later).

    Raises:
        HvdscaleError: a corpus or vocabulary file that is missing.
    """
    if cfg.source != "text":
        return
    files = [("data.text.src", cfg.text.src, "corpus")]
    if kind == "nmt":
        files.append(("data.text.tgt", cfg.text.tgt, "corpus"))
    files += [("data.text.src_vocab_file", cfg.text.src_vocab_file, "vocabulary"),
              ("data.text.tgt_vocab_file", cfg.text.tgt_vocab_file, "vocabulary")]
    for key, path, what in files:
        if path and not Path(path).is_file():
            raise HvdscaleError(f"{key}: {what} file not found: {path}")


def _read_lines(path: str, key: str) -> list[list[str]]:
    p = Path(path)
    if not p.is_file():
        raise HvdscaleError(f"{key}: corpus file not found: {p}")
    # Undecodable bytes become U+FFFD tokens: a corpus in another encoding still trains.
    lines = [ln.split() for ln in (_read_text(p, key, "corpus", "replace") or "").splitlines()]
    if not any(lines):
        raise HvdscaleError(f"{key}: corpus file is empty: {p}")
    return lines


@dataclass
class Corpus:
    """One rank's sentences (token ids) plus the vocabulary sizes they use."""

    src: list[np.ndarray]
    tgt: list[np.ndarray] | None
    src_vocab: int
    tgt_vocab: int
    truncated: int = 0


def _vocab_for(lines: list[list[str]], vocab_file: str, key: str, max_vocab: int) -> Vocab:
    vocab = Vocab.load(vocab_file, key) if vocab_file else Vocab.build(lines, max_vocab)
    if len(vocab) <= len(SPECIALS):
        raise HvdscaleError(f"{key}: vocabulary too small: {len(vocab)} tokens, no words beyond "
                            f"the {len(SPECIALS)} special tokens")
    return vocab


def load_text(cfg: TextConfig, kind: str, rank: int, size: int) -> Corpus:
    """Read the corpus, build or load vocabularies, and keep this rank's shard (line % size).

    Every rank reads the whole file so vocabularies agree without communication.
    """
    src_lines = _read_lines(cfg.src, "data.text.src")
    tgt_lines = None
    if kind == "nmt":
        tgt_lines = _read_lines(cfg.tgt, "data.text.tgt")
        if len(tgt_lines) != len(src_lines):
            raise HvdscaleError(
                f"data.text.tgt: parallel corpus line counts differ: {cfg.src} has "
                f"{len(src_lines)} lines, {cfg.tgt} has {len(tgt_lines)}")
    src_vocab = _vocab_for(src_lines, cfg.src_vocab_file, "data.text.src_vocab_file",
                           cfg.max_vocab)
    tgt_vocab = (_vocab_for(tgt_lines, cfg.tgt_vocab_file, "data.text.tgt_vocab_file",
                            cfg.max_vocab) if tgt_lines is not None else src_vocab)
    src, tgt, truncated = [], [] if tgt_lines is not None else None, 0
    for i in range(rank, len(src_lines), size):
        s = src_lines[i]
        t = tgt_lines[i] if tgt_lines is not None else None
        min_len = 2 if kind == "lm" else 1  # an lm sentence needs an input and a next token
        if len(s) < min_len or (t is not None and not t):
            continue  # empty lines carry no tokens to train on
        if len(s) > cfg.max_len or (t is not None and len(t) > cfg.max_len):
            truncated += 1
        src.append(src_vocab.encode(s[: cfg.max_len]))
        if tgt is not None and t is not None:
            tgt.append(tgt_vocab.encode(t[: cfg.max_len]))
    if not src:
        raise HvdscaleError(f"data.text.src: rank {rank} of {size} has no usable sentences in "
                            f"{cfg.src} ({len(src_lines)} lines)")
    return Corpus(src, tgt, len(src_vocab), len(tgt_vocab), truncated)


def synthetic_lengths(cfg: SyntheticConfig, n: int, rng: np.random.Generator) -> np.ndarray:
    """Sentence lengths drawn from the configured distribution, clipped to [min_len, max_len]."""
    if cfg.length_dist == "fixed":
        lens = np.full(n, cfg.max_len)
    elif cfg.length_dist == "uniform":
        lens = rng.integers(cfg.min_len, cfg.max_len + 1, size=n)
    else:
        # Lognormal with sigma 0.6 has the right skew for sentence lengths (a long tail of
        # long sentences); mu puts the unclipped mean at mean_len.
        sigma = 0.6
        mu = math.log(cfg.mean_len) - sigma**2 / 2
        lens = np.rint(rng.lognormal(mu, sigma, size=n))
    return np.clip(lens, cfg.min_len, cfg.max_len).astype(np.int64)


def make_synthetic(cfg: SyntheticConfig, kind: str, src_vocab: int, tgt_vocab: int, seed: int,
                   rank: int) -> Corpus:
    """This rank's seeded synthetic sentences (ids uniform over the non-special tokens)."""
    rng = np.random.default_rng([seed, rank])
    n = cfg.sentences_per_rank
    lens = synthetic_lengths(cfg, n, rng)
    if kind == "lm":
        lens = np.maximum(lens, 2)
    src = [rng.integers(len(SPECIALS), src_vocab, size=int(k)) for k in lens]
    tgt = None
    if kind == "nmt":
        tl = np.clip(np.rint(lens * cfg.tgt_len_ratio + rng.normal(0, 1, size=n)), 1,
                     max(1, round(cfg.max_len * cfg.tgt_len_ratio))).astype(np.int64)
        tgt = [rng.integers(len(SPECIALS), tgt_vocab, size=int(k)) for k in tl]
    return Corpus(src, tgt, src_vocab, tgt_vocab)


def load_corpus(cfg: DataConfig, kind: str, src_vocab: int, tgt_vocab: int, rank: int,
                size: int) -> Corpus:
    """This rank's corpus per ``data.source``: its shard, or with
    ``data.bucketing.mode=global`` the whole corpus (the union of every worker's shard), from
    which each rank takes its part of every global batch."""
    whole = cfg.bucketing.enabled and cfg.bucketing.mode == "global"
    if cfg.source == "text":
        return load_text(cfg.text, kind, 0, 1) if whole else load_text(cfg.text, kind, rank, size)
    if src_vocab == 0 or (kind == "nmt" and tgt_vocab == 0):
        raise HvdscaleError("model.src_vocab/model.tgt_vocab must be set (not 0) for "
                            "synthetic data")
    tgt_vocab = tgt_vocab or src_vocab
    if not whole:
        return make_synthetic(cfg.synthetic, kind, src_vocab, tgt_vocab, cfg.seed, rank)
    # Every worker's seeded sentences, generated here: the same corpus as per_rank mode.
    shards = [make_synthetic(cfg.synthetic, kind, src_vocab, tgt_vocab, cfg.seed, w)
              for w in range(size)]
    return Corpus([s for c in shards for s in c.src],
                  None if kind == "lm" else [t for c in shards for t in c.tgt or []],
                  src_vocab, tgt_vocab)


# --- batching ----------------------------------------------------------------------------------

def _pad(seqs: Sequence[np.ndarray], width: int, prefix: int | None = None,
         suffix: int | None = None) -> np.ndarray:
    extra = (prefix is not None) + (suffix is not None)
    out = np.full((len(seqs), width + extra), PAD, dtype=np.int64)
    for i, s in enumerate(seqs):
        row = s
        if prefix is not None:
            row = np.concatenate(([prefix], row))
        if suffix is not None:
            row = np.concatenate((row, [suffix]))
        out[i, : len(row)] = row
    return out


def collate(src: Sequence[np.ndarray], tgt: Sequence[np.ndarray] | None, kind: str,
            pad_src_to: int = 0, pad_tgt_to: int = 0) -> Batch:
    """Pad sentences into a ``Batch``; ``pad_*_to`` pads wider than the longest sentence."""
    if kind == "lm":
        inputs = [s[:-1] for s in src]
        targets = [s[1:] for s in src]
        width = max(max(len(s) for s in inputs), pad_src_to - 1)
        lens = np.array([len(s) for s in inputs], dtype=np.int64)
        return Batch(_pad(inputs, width), lens, None, _pad(targets, width), lens.copy())
    assert tgt is not None
    s_width = max(max(len(s) for s in src), pad_src_to)
    t_width = max(max(len(t) for t in tgt), pad_tgt_to)
    return Batch(
        src=_pad(src, s_width),
        src_len=np.array([len(s) for s in src], dtype=np.int64),
        tgt_in=_pad(tgt, t_width, prefix=BOS),
        tgt_out=_pad(tgt, t_width, suffix=EOS),
        tgt_len=np.array([len(t) + 1 for t in tgt], dtype=np.int64),
    )


def concat_batches(batches: Sequence[Batch]) -> Batch:
    """The union of several batches as one batch, re-padded to the widest (for references)."""
    def stack(arrays: list[np.ndarray]) -> np.ndarray:
        width = max(a.shape[1] for a in arrays)
        return np.vstack([np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=PAD)
                          for a in arrays])

    return Batch(
        src=stack([b.src for b in batches]),
        src_len=np.concatenate([b.src_len for b in batches]),
        tgt_in=None if batches[0].tgt_in is None else stack([b.tgt_in for b in batches]),
        tgt_out=stack([b.tgt_out for b in batches]),
        tgt_len=np.concatenate([b.tgt_len for b in batches]),
    )


def geometric_boundaries(max_len: int, min_len: int = 8, ratio: float = 1.25) -> list[int]:
    """Bucket upper bounds min_len, x1.25, ... up to max_len (as in common NMT toolkits)."""
    bounds, b = [], float(min_len)
    while b < max_len:
        bounds.append(int(b))
        b = max(b * ratio, b + 1)
    bounds.append(max_len)
    return sorted(set(bounds))


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


# --- global batches split across ranks ----------------------------------------------------------

GLOBAL_SEED_TAG = 13  # the global order's seed: [data.seed, epoch, 13]; no rank in it


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
