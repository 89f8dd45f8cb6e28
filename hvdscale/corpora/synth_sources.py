"""The learnable synthetic sources behind ``data.synthetic.kind`` and their loss floors:
``markov`` for the lm (hvdscale.corpora.synth_markov), ``mapped`` for nmt (synth_nmt), and the
floor of ``uniform`` tokens. Framework-free; imports nothing above the synthetic generators."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from hvdscale.config import SyntheticConfig
from hvdscale.corpora.synth_markov import MarkovChain, make_chain, sample_sentences
from hvdscale.corpora.synth_nmt import make_pairs, substitution_table
from hvdscale.errors import HvdscaleError

FIRST_ID = 4  # the first real token id (after <pad> <unk> <s> </s>)


@lru_cache(maxsize=4)
def chain_for(vocab: int, order: int, successors: int, alpha: float, seed: int) -> MarkovChain:
    """The run's chain (cached: the training shard and the evaluation set share it)."""
    return make_chain(vocab, order, successors, alpha, seed, FIRST_ID)


def _chain(cfg: SyntheticConfig, vocab: int, seed: int) -> MarkovChain:
    return chain_for(vocab, cfg.markov_order, cfg.markov_successors, cfg.markov_dirichlet, seed)


def learnable_sentences(cfg: SyntheticConfig, kind: str, src_vocab: int, tgt_vocab: int,
                        seed: int, lengths: np.ndarray, rng: np.random.Generator
                        ) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """Sentences of ``data.synthetic.kind`` (markov or mapped) with the given lengths.

    Args:
        cfg: the ``data.synthetic`` section.
        kind: ``model.kind``.
        src_vocab, tgt_vocab: vocabulary sizes (specials included).
        seed: ``data.seed``: fixes the language (chain or table), the same on every rank.
        lengths: sentence lengths.
        rng: the sentences' own random stream (per rank, or the evaluation set's).

    Raises:
        HvdscaleError: a source that does not fit the model kind.
    """
    if cfg.kind == "markov":
        if kind != "lm":
            raise HvdscaleError("data.synthetic.kind=markov is an lm source; use mapped for nmt")
        return sample_sentences(_chain(cfg, src_vocab, seed), lengths, rng), None
    if kind != "nmt":
        raise HvdscaleError("data.synthetic.kind=mapped is an nmt source; use markov for lm")
    if src_vocab - FIRST_ID < 2 or tgt_vocab - FIRST_ID < 2:
        raise HvdscaleError("data.synthetic.kind=mapped needs at least 2 real tokens in "
                            "model.src_vocab and model.tgt_vocab")
    table = substitution_table(src_vocab, tgt_vocab, seed, FIRST_ID)
    return make_pairs(lengths, src_vocab, table, rng, FIRST_ID)


def floor_loss(cfg: SyntheticConfig, kind: str, src_vocab: int, seed: int,
               src_lengths: np.ndarray) -> float | None:
    """The best achievable per-token loss (nats) on sentences of these source lengths, where
    known: markov (exact expected value), mapped (zero), uniform lm (ln of the real tokens: no
    context helps); None for uniform nmt (its target lengths are noisy given the source)."""
    if cfg.kind == "markov":
        return _chain(cfg, src_vocab, seed).floor_loss(src_lengths)
    if cfg.kind == "mapped":
        return 0.0
    return math.log(src_vocab - FIRST_ID) if kind == "lm" else None
