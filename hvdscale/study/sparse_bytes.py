"""Embedding-gradient bytes per step, dense against sparse, with the touched rows measured from
the run's own data (for ``predict``, the breakdown and bench/bench_sparse.py).

A rank's batch looks up ``k`` distinct rows of a ``rows x dim`` table; dense merging moves the
whole table (``4 rows dim`` bytes), sparse merging ``k`` int64 ids and ``k x dim`` float32 values
(``hvdscale.strategies.sparse_rows.sparse_bytes``). ``k`` is counted on the first batches of each
rank's data plan, exactly as the runner would batch them, so a vocabulary's skew, the sentence
lengths and the batch size all show.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hvdscale.config import RunConfig
from hvdscale.models import EMBEDDING_INPUTS
from hvdscale.strategies.sparse_rows import AUTO_MAX_SHARE, sparse_bytes

SAMPLE_STEPS = 8
"""Batches per rank whose touched rows are counted."""


def sparse_active(cfg: RunConfig) -> str:
    """How the config merges embedding gradients: ``dense``, ``sparse`` or ``auto``."""
    s = cfg.strategy
    if s.name == "ps" and s.ps.sparse_embeddings != "off":
        return "sparse" if s.ps.sparse_embeddings == "on" else "auto"
    if s.name == "horovod" and s.horovod.embedding_grads == "gathered":
        return "sparse"
    return "dense"


def touched_rows(cfg: RunConfig, ranks: int = 1,
                 steps: int = SAMPLE_STEPS) -> dict[str, dict[str, float]]:
    """Per embedding table: its rows and the mean distinct rows one rank's batch touches
    (``per_rank``) and all ranks' batches of a step together (``union``), from the data."""
    from hvdscale.core.batching import BatchPlan, per_rank_batch_size
    from hvdscale.core.data import load_corpus

    m = cfg.model
    tgt_vocab = m.tgt_vocab or m.src_vocab
    fields = {"src_embed.weight": ("src", m.src_vocab), "tgt_embed.weight": ("tgt_in", tgt_vocab),
              "embed.weight": ("src", m.src_vocab)}
    tables = {n: fields[n] for n in EMBEDDING_INPUTS.get(m.kind, {})}
    per: dict[str, list[int]] = {n: [] for n in tables}
    union: dict[str, list[int]] = {n: [] for n in tables}
    its = []
    for r in range(ranks):
        corpus = load_corpus(cfg.data, m.kind, m.src_vocab, tgt_vocab, r, ranks)
        plan = BatchPlan(corpus, cfg.data, m.kind, per_rank_batch_size(cfg.data, r, ranks), r)
        its.append(plan.batches())
    for _ in range(steps):
        batches = [next(it) for it in its]
        for name, (field, _) in tables.items():
            ids = [np.unique(getattr(b, field)) for b in batches]
            per[name] += [i.size for i in ids]
            union[name].append(np.unique(np.concatenate(ids)).size)
    return {n: {"rows": float(tables[n][1]), "per_rank": float(np.mean(per[n])),
                "union": float(np.mean(union[n]))} for n in tables}


def table_bytes(rows: float, dim: int, k: float, mode: str) -> float:
    """Bytes of one table's gradient from one rank: dense, sparse, or ``auto``'s choice."""
    dense = 4.0 * rows * dim
    sparse = float(sparse_bytes(1, dim)) * k
    if mode == "dense":
        return dense
    if mode == "auto":
        return sparse if sparse <= AUTO_MAX_SHARE * dense else dense
    return sparse


def embedding_bytes(cfg: RunConfig, ranks: int = 1) -> dict[str, Any]:
    """Per embedding table, one rank's gradient bytes per step dense and as this config sends
    them, with the measured touched-row share."""
    mode = sparse_active(cfg)
    out = {}
    for name, t in touched_rows(cfg, ranks).items():
        dim = cfg.model.embed_dim
        out[name] = {"rows": int(t["rows"]), "touched_per_rank": t["per_rank"],
                     "touched_union": t["union"], "share": t["per_rank"] / t["rows"],
                     "dense_bytes": table_bytes(t["rows"], dim, t["per_rank"], "dense"),
                     "sent_bytes": table_bytes(t["rows"], dim, t["per_rank"], mode)}
    return {"mode": mode, "tables": out}


def adjust_gradient_bytes(cfg: RunConfig, sizes: list[tuple[str, int]],
                          dense: list[int]) -> list[int]:
    """``dense`` (bytes per tensor, in ``sizes`` order) with the embedding tables counted as
    this config sends them (unchanged when it merges densely)."""
    if sparse_active(cfg) == "dense":
        return dense
    sent = {n: t["sent_bytes"] for n, t in embedding_bytes(cfg)["tables"].items()}
    return [int(sent.get(name, b)) for (name, _), b in zip(sizes, dense, strict=True)]
