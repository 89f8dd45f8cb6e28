"""Sentences and batches: synthetic and text corpora, vocabularies, collation.

Framework-free (numpy only). A sentence pair is two int arrays of token ids; a ``Batch`` is padded
numpy arrays plus the real token counts that the meter and the token-weighted loss use.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hvdscale.config import DataConfig, SyntheticConfig, TextConfig
from hvdscale.corpora.synth_sources import learnable_sentences
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
        if not cfg.eval_src and held_out(i, cfg.eval_fraction):
            continue  # the evaluation split (hvdscale.corpora.evalset) is never trained on
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


def held_out(line: int, fraction: float) -> bool:
    """Whether line ``line`` belongs to the evaluation split of ``data.text.eval_fraction``:
    every k-th line (k = round(1 / fraction)), spread evenly through the file."""
    return fraction > 0 and line % max(2, round(1 / fraction)) == 0


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
    if cfg.kind != "uniform":  # learnable sources with a known floor
        src_l, tgt_l = learnable_sentences(cfg, kind, src_vocab, tgt_vocab, seed, lens, rng)
        return Corpus(src_l, tgt_l, src_vocab, tgt_vocab)
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


# --- collation -----------------------------------------------------------------------------------

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


def probe_batch(kind: str) -> Batch:
    """Two sentences of uneven length as a ``kind`` batch: what a custom model's forward is
    checked on before training (``frameworks/*/build.py``). Token id 4, the first non-special
    one, is in every vocabulary (``model.*_vocab >= 5``)."""
    sents = [np.array([4, 4, 4], dtype=np.int64), np.array([4, 4], dtype=np.int64)]
    return collate(sents, None if kind == "lm" else sents, kind)
