"""Embedding-gradient bytes per step as each strategy really moves them, with the touched rows
measured from the run's own data (for ``predict``, the breakdown and bench/bench_sparse.py).

A rank's batch looks up ``k`` distinct rows of a ``rows x dim`` table; dense merging moves the
whole table (``4 rows dim`` bytes). What a sparse setting moves depends on the strategy:

- parameter server (``sparse_embeddings``): each worker pushes its ``k`` unique rows (int64 ids
  and float32 values, ``hvdscale.strategies.sparse_rows.sparse_bytes``); it pulls the union of
  all workers' rows only with plain SGD (untouched rows stay unchanged), every row otherwise;
  ``auto`` picks per table by the same rule as the servers.
- Horovod ``embedding_grads=gathered``: an allgather of each rank's rows, so a rank receives
  ``(n - 1)`` times one rank's payload. TensorFlow's gather gradient has one row per position
  of the batch (``B x T``, padding included) with int32 ids; PyTorch's sparse gradient one row
  per non-padding token with int64 ids, coalesced to the unique non-padding rows only with
  ``overlap=after-backward`` (``frameworks/torch/sparse.py``).

Rows are counted on the first batches of each rank's data plan, exactly as the runner would
batch them at the predicted rank count (strong scaling splits the global batch), so a
vocabulary's skew, the sentence lengths and the batch size all show.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hvdscale.config import RunConfig
from hvdscale.models import EMBEDDING_INPUTS
from hvdscale.strategies.sparse_rows import AUTO_MAX_SHARE, ID_BYTES, sparse_bytes

SAMPLE_STEPS = 8
"""Batches per rank whose touched rows are counted."""
UNION_MAX_RANKS = 16
"""Most ranks whose data is read for the union of touched rows; beyond, the union grows as
independent draws of the measured share (``union_rows``)."""
GLOBAL_SAMPLE_RANKS = 4
"""Most ranks read under global bucketing with strong scaling (see ``sample_ranks``)."""
TF_ID_BYTES = 4
"""TensorFlow's IndexedSlices carry the batch's int32 token ids."""
PAD = 0
"""The padding token id (PyTorch's ``padding_idx``: no gradient row for it)."""

_TOUCHED: dict[tuple[str, int, int], dict[str, dict[str, float]]] = {}


def sparse_active(cfg: RunConfig) -> str:
    """How the config merges embedding gradients: ``dense``, ``sparse`` or ``auto``."""
    s = cfg.strategy
    if s.name == "ps" and s.ps.sparse_embeddings != "off":
        return "sparse" if s.ps.sparse_embeddings == "on" else "auto"
    if s.name == "horovod" and s.horovod.embedding_grads == "gathered":
        return "sparse"
    return "dense"


def _count(batches: list[Any], field: str) -> dict[str, Any]:
    """One step's row counts of one table over the ranks' batches."""
    ids = [np.asarray(getattr(b, field)) for b in batches]
    unique = [np.unique(i) for i in ids]
    return {"per_rank": [u.size for u in unique],
            "nonpad_unique": [int((u != PAD).sum()) for u in unique],
            "tokens": [i.size for i in ids], "nonpad_tokens": [int((i != PAD).sum()) for i in ids],
            "union": np.unique(np.concatenate(unique)).size}


def touched_rows(cfg: RunConfig, ranks: int = 1, steps: int = SAMPLE_STEPS,
                 size: int | None = None) -> dict[str, dict[str, float]]:
    """Per embedding table, means over the sampled steps of the first ``ranks`` workers of
    ``size`` (default ``ranks``; a worker's batch follows ``data.scaling`` at ``size``): its
    ``rows``; per rank batch the distinct ids (``per_rank``, padding included as the parameter
    server sends it), distinct non-padding ids (``nonpad_unique``), positions (``tokens``,
    B x T) and non-padding positions (``nonpad_tokens``); and the distinct ids of all read
    ranks' batches (``union``)."""
    size = size or ranks
    key = (repr(cfg), ranks, steps, size)
    if key in _TOUCHED:  # predict asks again for every strategy and rank count
        return _TOUCHED[key]
    from hvdscale.core.batching import make_plan
    from hvdscale.corpora.corpus import load_corpus

    m = cfg.model
    tgt_vocab = m.tgt_vocab or m.src_vocab
    rows = {"src": m.src_vocab, "tgt_in": tgt_vocab}
    tables = {n: (field, rows[field]) for n, field in embedding_inputs(cfg).items()}
    counts: dict[str, dict[str, list]] = {n: {} for n in tables}
    # Global bucketing gives every rank the same whole corpus: build it once.
    shared = cfg.data.bucketing.enabled and cfg.data.bucketing.mode == "global"
    whole = load_corpus(cfg.data, m.data_kind, m.src_vocab, tgt_vocab, 0, size) if shared else None
    its = []
    for r in range(ranks):  # exactly as the runner batches worker r of size (train/rank_data.py)
        corpus = whole if whole is not None else \
            load_corpus(cfg.data, m.data_kind, m.src_vocab, tgt_vocab, r, size)
        its.append(make_plan(corpus, cfg.data, m.data_kind, r, size).batches())
    for _ in range(steps):
        batches = [next(it) for it in its]
        for name, (field, _) in tables.items():
            for k, v in _count(batches, field).items():
                counts[name].setdefault(k, []).extend(v if isinstance(v, list) else [v])
    out = {n: {"rows": float(tables[n][1]),
               **{k: float(np.mean(v)) for k, v in counts[n].items()}} for n in tables}
    _TOUCHED[key] = out
    return out


def embedding_inputs(cfg: RunConfig) -> dict[str, str]:
    """Each embedding table's parameter name -> the batch field it looks up: the shipped
    models' tables, or a custom model's declared ``EMBEDDINGS`` (its module imported)."""
    m = cfg.model
    if m.kind != "custom":
        return dict(EMBEDDING_INPUTS[m.kind])
    from hvdscale.models.custom import builder_module, declared_embeddings

    return declared_embeddings(m, builder_module(m))


def table_width(cfg: RunConfig, name: str, rows: float) -> int:
    """Width of embedding table ``name`` of ``rows`` rows (from the model's own parameters)."""
    return dict(tensor_sizes(cfg))[name] // int(rows)


def sample_ranks(cfg: RunConfig, workers: int) -> int:
    """How many of ``workers`` ranks ``sampled`` reads: ``UNION_MAX_RANKS`` at most, or
    ``GLOBAL_SAMPLE_RANKS`` where every rank's plan cuts the whole corpus's epoch at the full
    rank count (global bucketing, strong scaling: seconds per rank at hundreds of ranks)."""
    b = cfg.data.bucketing
    strong_global = cfg.data.scaling == "strong" and b.enabled and b.mode == "global"
    return min(workers, GLOBAL_SAMPLE_RANKS if strong_global else UNION_MAX_RANKS)


def sampled(cfg: RunConfig, workers: int) -> dict[str, dict[str, float]]:
    """``touched_rows`` of the first ``sample_ranks`` of ``workers`` workers. Under weak
    scaling a rank's batch does not depend on ``workers``, so the plans are built at that
    smaller count (one reading serves every larger rank count); strong scaling builds them at
    ``workers``, whose share of the global batch each rank gets."""
    m = sample_ranks(cfg, workers)
    return touched_rows(cfg, m, size=workers if cfg.data.scaling == "strong" else m)


def union_rows(cfg: RunConfig, workers: int) -> dict[str, float]:
    """Per table, the distinct rows all ``workers`` touch in a step: measured up to
    ``sample_ranks`` ranks, beyond as independent draws of the measured share."""
    m = sample_ranks(cfg, workers)
    out = {}
    for name, t in sampled(cfg, workers).items():
        share = min(1.0, t["union"] / t["rows"])
        out[name] = t["rows"] * (1 - (1 - share) ** (workers / m)) if workers > m else t["union"]
    return out


def table_bytes(rows: float, dim: int, k: float, mode: str) -> float:
    """Bytes of one table's gradient from one rank: dense, sparse, or ``auto``'s choice."""
    dense = 4.0 * rows * dim
    sparse = float(sparse_bytes(1, dim)) * k
    if mode == "dense":
        return dense
    if mode == "auto":
        return sparse if sparse <= AUTO_MAX_SHARE * dense else dense
    return sparse


def gathered_rows(cfg: RunConfig, t: dict[str, float]) -> float:
    """Rows one rank's gathered gradient of a table carries (see the module docstring)."""
    if cfg.framework == "tf":
        return t["tokens"]
    if cfg.strategy.horovod.overlap == "hooks":
        return t["nonpad_tokens"]  # hooks hand Horovod the uncoalesced gradient
    return t["nonpad_unique"]


def row_bytes(cfg: RunConfig) -> tuple[int, int]:
    """(id bytes, value bytes per row element) of a gathered row in ``cfg``'s framework."""
    return (TF_ID_BYTES if cfg.framework == "tf" else ID_BYTES), 4


def embedding_bytes(cfg: RunConfig, workers: int = 1) -> dict[str, Any]:
    """Per embedding table, one rank's gradient bytes per step with ``workers`` workers (its
    batch per ``data.scaling``), dense and as this config sends them (its push, or its share of
    an allgather), with the measured touched-row share."""
    mode = sparse_active(cfg)
    horovod = cfg.strategy.name == "horovod"
    ids, val = row_bytes(cfg)
    out = {}
    per = sampled(cfg, workers)
    for name, t in per.items():
        dim = table_width(cfg, name, t["rows"])
        dense = table_bytes(t["rows"], dim, t["per_rank"], "dense")
        if horovod and mode != "dense":
            sent = gathered_rows(cfg, t) * (ids + val * dim)
        else:
            sent = table_bytes(t["rows"], dim, t["per_rank"], mode)
        out[name] = {"rows": int(t["rows"]), "touched_per_rank": t["per_rank"],
                     "touched_union": t["union"], "share": t["per_rank"] / t["rows"],
                     "dense_bytes": dense, "sent_bytes": sent}
    return {"mode": mode, "tables": out}


def tensor_sizes(cfg: RunConfig) -> list[tuple[str, int]]:
    """(name, elements) of each parameter tensor of ``cfg``'s model, in parameter order."""
    from hvdscale.frameworks import load_framework

    m = cfg.model
    return load_framework(cfg.framework).tensor_sizes(m, m.src_vocab, m.tgt_vocab or m.src_vocab)


def gathered_tensor_bytes(cfg: RunConfig, workers: int = 1) -> tuple[int, ...]:
    """Per tensor (parameter order), one rank's allgather payload with ``workers`` ranks under
    Horovod's ``embedding_grads=gathered`` (0: allreduced; under strong scaling a rank gathers
    its share of the global batch); empty when ``cfg`` allreduces everything."""
    if not (cfg.strategy.name == "horovod" and sparse_active(cfg) == "sparse"):
        return ()
    sent = {n: t["sent_bytes"] for n, t in embedding_bytes(cfg, workers)["tables"].items()}
    return tuple(int(sent.get(name, 0)) for name, _ in tensor_sizes(cfg))


def ps_bytes(cfg: RunConfig, workers: int) -> tuple[float, float] | None:
    """(push, pull) bytes per worker per step of ``cfg``'s parameter server with sparse
    embeddings and ``workers`` workers; None when it moves the dense model both ways. Pulls
    are sparse only with plain SGD (the union of the workers' rows); the servers' choice under
    ``auto`` follows the same rule per table."""
    mode = sparse_active(cfg)
    if cfg.strategy.name != "ps" or mode == "dense":
        return None
    sizes = tensor_sizes(cfg)
    per = sampled(cfg, workers)
    union = union_rows(cfg, workers)
    push = pull = 0.0
    for name, n in sizes:
        if name not in per:
            push, pull = push + 4.0 * n, pull + 4.0 * n
            continue
        rows = per[name]["rows"]
        dim = n // int(rows)
        push += table_bytes(rows, dim, per[name]["per_rank"], mode)
        pull += table_bytes(rows, dim, union[name], mode if cfg.optim.name == "sgd" else "dense")
    return push, pull


def adjust_gradient_bytes(cfg: RunConfig, sizes: list[tuple[str, int]],
                          dense: list[int]) -> list[int]:
    """``dense`` (bytes per tensor, in ``sizes`` order) with the embedding tables counted as
    one rank sends them under this config (unchanged when it merges densely): the S of
    ``predict --fit``."""
    if sparse_active(cfg) == "dense":
        return dense
    sent = {n: t["sent_bytes"] for n, t in embedding_bytes(cfg)["tables"].items()}
    return [int(sent.get(name, b)) for (name, _), b in zip(sizes, dense, strict=True)]
