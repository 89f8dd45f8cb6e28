"""Where batches come from: synthetic or text corpora, batch sizes, length bucketing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from hvdscale.config.fields import check as _check
from hvdscale.errors import ConfigError


@dataclass(frozen=True)
class SyntheticConfig:
    """Seeded synthetic sentences (the seed notes' ``--use_synthetic_data``)."""

    sentences_per_rank: int = 2048
    """Pool of sentences each rank draws its batches from."""
    length_dist: Literal["fixed", "uniform", "lognormal"] = "lognormal"
    """``fixed``: every sentence ``max_len`` long (the seeds' synthetic runs); ``uniform`` in
    [min_len, max_len]; ``lognormal``: long-tailed like real corpora, clipped to the range."""
    min_len: int = 3
    """Shortest sentence, in tokens."""
    max_len: int = 100
    """Longest sentence, in tokens (the seeds' ``--src_max_len``)."""
    mean_len: float = 25.0
    """Mean length for ``lognormal`` (before clipping)."""
    tgt_len_ratio: float = 1.1
    """Target length / source length (nmt)."""
    kind: Literal["uniform", "markov", "mapped"] = "uniform"
    """``uniform``: random tokens (nothing to learn; the lm's floor is ln of the real tokens);
    ``markov`` (lm): a seeded sparse Markov chain with an exactly known perplexity floor;
    ``mapped`` (nmt): target = seeded substitution + reversal of each clause of the source
    (floor: zero loss). See hvdscale/corpora/synth_markov.py and synth_nmt.py."""
    markov_order: int = 1
    """Tokens of context that determine the next token (1 or 2)."""
    markov_successors: int = 8
    """Possible next tokens per state."""
    markov_dirichlet: float = 0.5
    """Dirichlet concentration of each state's next-token weights (smaller: more peaked)."""
    eval_seed: int = 0
    """Seed of the evaluation set (0: derived from ``data.seed``; never a training stream)."""
    eval_sentences: int = 256
    """Sentences in the evaluation set."""

    def __post_init__(self) -> None:
        _check(self.kind in ("uniform", "markov", "mapped"), "data.synthetic.kind",
               "must be uniform, markov or mapped", self.kind)
        _check(self.markov_order in (1, 2), "data.synthetic.markov_order", "must be 1 or 2",
               self.markov_order)
        _check(self.markov_successors >= 1, "data.synthetic.markov_successors", "must be >= 1",
               self.markov_successors)
        _check(self.markov_dirichlet > 0, "data.synthetic.markov_dirichlet", "must be > 0",
               self.markov_dirichlet)
        _check(self.eval_sentences >= 1, "data.synthetic.eval_sentences", "must be >= 1",
               self.eval_sentences)
        _check(self.sentences_per_rank >= 1, "data.synthetic.sentences_per_rank", "must be >= 1",
               self.sentences_per_rank)
        _check(self.length_dist in ("fixed", "uniform", "lognormal"), "data.synthetic.length_dist",
               "must be fixed, uniform or lognormal", self.length_dist)
        _check(self.min_len >= 1, "data.synthetic.min_len", "must be >= 1", self.min_len)
        _check(self.max_len >= self.min_len, "data.synthetic.max_len",
               f"must be >= data.synthetic.min_len ({self.min_len})", self.max_len)
        _check(self.mean_len > 0, "data.synthetic.mean_len", "must be > 0", self.mean_len)
        _check(self.tgt_len_ratio > 0, "data.synthetic.tgt_len_ratio", "must be > 0",
               self.tgt_len_ratio)


@dataclass(frozen=True)
class TextConfig:
    """Corpora read from files: one sentence per line, whitespace-separated tokens."""

    src: str = ""
    """Source-side file (nmt) or the corpus (lm)."""
    tgt: str = ""
    """Target-side file, line-aligned with ``src`` (nmt only)."""
    src_vocab_file: str = ""
    """Vocabulary file (one token per line); empty builds it from the data."""
    tgt_vocab_file: str = ""
    """Target vocabulary file (nmt); empty builds it from the data."""
    max_vocab: int = 30000
    """Most frequent tokens kept when the vocabulary is built from the data."""
    max_len: int = 100
    """Sentences longer than this are truncated (the seeds' ``--src_max_len``)."""
    eval_fraction: float = 0.0
    """Fraction of the lines held out for evaluation (every k-th line, never trained on)."""
    eval_src: str = ""
    """Evaluation file (source side, or the lm's corpus); overrides ``eval_fraction``."""
    eval_tgt: str = ""
    """Evaluation file, target side (nmt), line-aligned with ``eval_src``."""

    def __post_init__(self) -> None:
        _check(0.0 <= self.eval_fraction < 0.5, "data.text.eval_fraction", "must be in [0, 0.5)",
               self.eval_fraction)
        _check(self.max_vocab >= 5, "data.text.max_vocab", "must be >= 5", self.max_vocab)
        _check(self.max_len >= 1, "data.text.max_len", "must be >= 1", self.max_len)


@dataclass(frozen=True)
class BucketConfig:
    """Length bucketing: sentences of similar length share a batch, so less is padding."""

    enabled: bool = False
    """Group sentences by length before batching."""
    boundaries: tuple[int, ...] = ()
    """Bucket upper bounds in tokens (a sentence's length is its longer side); empty gives
    geometric bounds 8, x1.25, ... up to the longest sentence."""
    tokens_per_batch: int = 0
    """Batch to a token budget (sentences x longest length, so padding counts) instead of
    ``data.batch_size`` sentences; 0 batches by sentence count. Per rank under weak scaling;
    the global budget, divided across ranks, under strong scaling."""
    mode: Literal["per_rank", "aligned", "global"] | None = None
    """How the ranks' batches of a step are formed (unset: ``per_rank``). ``per_rank``: each
    rank batches its own shard and shuffles its own buckets. ``aligned``: as ``per_rank``, but
    at each step every rank takes its batch from the same length bucket (a bucket sequence
    drawn with a seed all ranks share, agreed with one small allgather before training; with
    ``measure.epochs`` a bucket gets as many steps as the rank with most batches in it holds,
    others idle there; with a fixed step count buckets are drawn in proportion to their
    batches, and a rank with none in the drawn bucket takes its nearest). ``global``: every
    rank derives the same sequence of global batches from the whole corpus with the shared
    seed, one bucket each, to the global batch (``tokens_per_batch`` or ``data.batch_size``,
    per rank x ranks under weak scaling); each step's global batch is split across the ranks
    into contiguous length ranges with equal padded token slots (the work of an RNN step), so
    no rank waits for one that drew longer sentences. A rank whose part of a step is empty
    takes part with no batch. An RNN step lasts as long as its longest sentence, not its token
    count: that is what ``aligned`` and ``global`` address."""
    align_ranks: bool = False
    """Deprecated alias of ``mode: aligned`` (kept so older configs run); set ``mode``."""

    def __post_init__(self) -> None:
        _check(list(self.boundaries) == sorted(set(self.boundaries)), "data.bucketing.boundaries",
               "must be strictly increasing", list(self.boundaries))
        _check(all(b >= 1 for b in self.boundaries), "data.bucketing.boundaries",
               "must be positive", list(self.boundaries))
        _check(self.tokens_per_batch >= 0, "data.bucketing.tokens_per_batch", "must be >= 0",
               self.tokens_per_batch)
        _check(self.mode in (None, "per_rank", "aligned", "global"), "data.bucketing.mode",
               "must be per_rank, aligned or global", self.mode)
        if self.align_ranks and self.mode not in (None, "aligned"):
            raise ConfigError(f"data.bucketing.align_ranks=true (deprecated: it means "
                              f"data.bucketing.mode=aligned) conflicts with "
                              f"data.bucketing.mode={self.mode}; set only data.bucketing.mode")
        mode = self.mode or ("aligned" if self.align_ranks else "per_rank")
        # Resolved once here, so code and records read one field: mode (align_ranks mirrors it).
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "align_ranks", mode == "aligned")
        if not self.enabled and mode != "per_rank":
            raise ConfigError(f"data.bucketing.mode={mode} needs data.bucketing.enabled=true")


@dataclass(frozen=True)
class DataConfig:
    """Where sentences come from and how they are batched per rank."""

    source: Literal["synthetic", "text"] = "synthetic"
    """``synthetic`` (seeded random sentences) or ``text`` (files in ``data.text``)."""
    batch_size: int = 32
    """Sentences per rank per step (weak scaling), or the global batch (strong scaling)."""
    scaling: Literal["weak", "strong"] = "weak"
    """``weak``: fixed per-rank batch (the usual case); ``strong``: ``batch_size`` is the global
    batch, divided across ranks (uneven remainders go to the lowest ranks)."""
    pad_to: Literal["batch", "max"] = "batch"
    """Pad each batch to its longest sentence, or every batch to the maximum length."""
    shuffle: bool = True
    """Shuffle each epoch (seeded)."""
    seed: int = 1
    """Seed of the data (synthetic sentences and shuffling); each rank offsets it by its rank."""
    synthetic: SyntheticConfig = field(default_factory=SyntheticConfig)
    """Synthetic data settings."""
    text: TextConfig = field(default_factory=TextConfig)
    """Text corpus settings."""
    bucketing: BucketConfig = field(default_factory=BucketConfig)
    """Length bucketing settings."""

    def __post_init__(self) -> None:
        _check(self.source in ("synthetic", "text"), "data.source", "must be synthetic or text",
               self.source)
        _check(self.batch_size >= 1, "data.batch_size", "must be >= 1", self.batch_size)
        _check(self.scaling in ("weak", "strong"), "data.scaling", "must be weak or strong",
               self.scaling)
        _check(self.pad_to in ("batch", "max"), "data.pad_to", "must be batch or max", self.pad_to)
        if self.source == "text":
            _check(bool(self.text.src), "data.text.src", "must name a corpus file with "
                   "data.source=text", self.text.src)
