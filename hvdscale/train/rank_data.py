"""The run's data on this rank: its shard of the corpus, the model's vocabulary sizes, and its
batch plan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hvdscale.config import RunConfig
from hvdscale.core.batching import BatchPlan, GlobalPlan, make_plan
from hvdscale.core.world import World
from hvdscale.corpora.corpus import Corpus, load_corpus
from hvdscale.errors import HvdscaleError


@dataclass(frozen=True)
class RunData:
    """What the runner, the model and the record take from the data."""

    corpus: Corpus
    src_vocab: int
    tgt_vocab: int
    plan: BatchPlan | GlobalPlan | None
    """This rank's batches (None on a rank that only serves)."""


def load_data(cfg: RunConfig, strategy: Any, world: World) -> RunData:
    """This rank's shard of the corpus, the vocabulary sizes and (if it computes) its plan."""
    # Data is sharded over the ranks that compute (serve-only ranks read shard 0 just for the
    # vocabulary), so a dedicated server's job trains on the same data as colocated ones.
    widx = getattr(strategy, "worker_index", world.rank)
    nworkers = getattr(strategy, "num_workers", world.size)
    corpus = load_corpus(cfg.data, cfg.model.data_kind, cfg.model.src_vocab, cfg.model.tgt_vocab,
                         widx, nworkers)
    src_vocab, tgt_vocab = vocab_sizes(cfg, corpus)
    plan = None
    if strategy.computes:
        plan = make_plan(corpus, cfg.data, cfg.model.data_kind, widx, nworkers)
    return RunData(corpus, src_vocab, tgt_vocab, plan)


def vocab_sizes(cfg: RunConfig, corpus: Any) -> tuple[int, int]:
    """Vocabulary sizes of the model: from config, or the data's when config says 0."""
    m = cfg.model
    if cfg.data.source != "text":
        return m.src_vocab, m.tgt_vocab or m.src_vocab
    pairs = [("model.src_vocab", m.src_vocab, corpus.src_vocab, "data.text.src")]
    if m.data_kind == "nmt":
        pairs.append(("model.tgt_vocab", m.tgt_vocab, corpus.tgt_vocab, "data.text.tgt"))
    for key, want, have, where in pairs:
        if want and want != have:
            raise HvdscaleError(f"{key}={want} does not match the vocabulary of {where} "
                                f"({have} tokens with specials); set {key}=0 to take it from "
                                "the data")
    return corpus.src_vocab, corpus.tgt_vocab
