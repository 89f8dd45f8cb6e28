"""The held-out evaluation set of a run, for every data source, and its known loss floor.

Synthetic data: sentences from their own seeded stream (``data.synthetic.eval_seed``, else one
derived from ``data.seed`` that no rank's training stream uses), of the same language (the same
Markov chain or substitution table) and length distribution. Text: the file pair
``data.text.eval_src``/``eval_tgt``, else the lines ``data.text.eval_fraction`` holds out of
training (``hvdscale.corpora.corpus.held_out``). Batches are sorted by length so evaluation pads
little; their order is fixed, so the summed loss is the same however often it is computed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from hvdscale.config import DataConfig
from hvdscale.corpora.corpus import (
    Batch,
    _read_lines,
    _vocab_for,
    collate,
    held_out,
    make_synthetic,
    synthetic_lengths,
)
from hvdscale.corpora.synth_sources import floor_loss, learnable_sentences
from hvdscale.errors import HvdscaleError

EVAL_STREAM = 0x6576616C  # the evaluation set's stream tag; no rank index reaches it


@dataclass(frozen=True)
class EvalSet:
    """Padded evaluation batches plus what the record states about them."""

    batches: list[Batch]
    sentences: int
    tokens: int
    """Loss tokens (what the summed loss is divided by)."""
    floor_loss: float | None
    """Best achievable per-token loss in nats where the source makes it known, else None."""


def make_eval_set(cfg: DataConfig, kind: str, src_vocab: int, tgt_vocab: int,
                  batch_size: int, max_sentences: int = 0) -> EvalSet:
    """The evaluation set of ``data`` (identical on every rank that builds it).

    Args:
        cfg: the ``data`` section.
        kind: ``model.kind``.
        src_vocab, tgt_vocab: the model's vocabulary sizes.
        batch_size: sentences per evaluation batch.
        max_sentences: keep at most this many sentences (0: all).

    Raises:
        HvdscaleError: a text corpus without an evaluation split, or an empty one.
    """
    floor = None
    if cfg.source == "text":
        src, tgt = _text_eval(cfg, kind)
    else:
        src, tgt = _synthetic_eval(cfg, kind, src_vocab, tgt_vocab or src_vocab)
    if max_sentences:
        src = src[:max_sentences]
        tgt = tgt[:max_sentences] if tgt is not None else None
    if cfg.source != "text":
        floor = floor_loss(cfg.synthetic, kind, src_vocab, cfg.seed,
                           np.array([len(s) for s in src]))
    order = sorted(range(len(src)), key=lambda i: (len(src[i]), i))
    batches = []
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        batches.append(collate([src[i] for i in idx],
                               [tgt[i] for i in idx] if tgt is not None else None, kind))
    return EvalSet(batches, len(src), sum(b.loss_tokens for b in batches), floor)


def _synthetic_eval(cfg: DataConfig, kind: str, src_vocab: int,
                    tgt_vocab: int) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    syn = dataclasses.replace(cfg.synthetic, sentences_per_rank=cfg.synthetic.eval_sentences)
    seed = cfg.synthetic.eval_seed or cfg.seed
    if syn.kind == "uniform":
        corpus = make_synthetic(syn, kind, src_vocab, tgt_vocab, seed, EVAL_STREAM)
        return corpus.src, corpus.tgt
    rng = np.random.default_rng([seed, EVAL_STREAM])
    lens = synthetic_lengths(syn, syn.sentences_per_rank, rng)
    if kind == "lm":
        lens = np.maximum(lens, 2)
    # The language itself (chain or table) comes from data.seed, as in training.
    return learnable_sentences(syn, kind, src_vocab, tgt_vocab, cfg.seed, lens, rng)


def _text_eval(cfg: DataConfig, kind: str) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    t = cfg.text
    if not t.eval_src and not t.eval_fraction:
        raise HvdscaleError("evaluation needs held-out text: set data.text.eval_fraction or "
                            "data.text.eval_src (and eval_tgt for nmt)")
    if kind == "nmt" and t.eval_src and not t.eval_tgt:
        raise HvdscaleError("data.text.eval_tgt must name the target side of data.text.eval_src")
    # The training vocabularies, built exactly as the training corpus builds them.
    src_lines = _read_lines(t.src, "data.text.src")
    src_vocab = _vocab_for(src_lines, t.src_vocab_file, "data.text.src_vocab_file", t.max_vocab)
    tgt_vocab = None
    if kind == "nmt":
        tgt_lines = _read_lines(t.tgt, "data.text.tgt")
        tgt_vocab = _vocab_for(tgt_lines, t.tgt_vocab_file, "data.text.tgt_vocab_file",
                               t.max_vocab)
    if t.eval_src:
        ev_src = _read_lines(t.eval_src, "data.text.eval_src")
        ev_tgt = _read_lines(t.eval_tgt, "data.text.eval_tgt") if kind == "nmt" else None
    else:
        keep = [i for i in range(len(src_lines)) if held_out(i, t.eval_fraction)]
        ev_src = [src_lines[i] for i in keep]
        ev_tgt = [tgt_lines[i] for i in keep] if kind == "nmt" else None
    if ev_tgt is not None and len(ev_tgt) != len(ev_src):
        raise HvdscaleError(f"data.text.eval_tgt: {len(ev_tgt)} lines, but the source side "
                            f"has {len(ev_src)}")
    src, tgt = [], [] if ev_tgt is not None else None
    min_len = 2 if kind == "lm" else 1
    for i, words in enumerate(ev_src):
        other = ev_tgt[i] if ev_tgt is not None else None
        if len(words) < min_len or (other is not None and not other):
            continue
        src.append(src_vocab.encode(words[: t.max_len]))
        if tgt is not None and tgt_vocab is not None and other is not None:
            tgt.append(tgt_vocab.encode(other[: t.max_len]))
    if not src:
        raise HvdscaleError("the evaluation split has no usable sentences (data.text)")
    return src, tgt
