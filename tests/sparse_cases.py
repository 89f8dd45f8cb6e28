"""Sparse embedding gradients, shared by both frameworks' multi-rank tests: the parameter server
with ``sparse_embeddings`` and Horovod's ``embedding_grads=gathered`` must change the parameters
as their dense twins and as one process on the union of the batches (tests/exactness.py, with
its naive-mean negative control), on data with repeated ids in a batch, ids only one rank
touches, and an idle rank (one whole epoch of uneven, bucketed batches)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hvdscale.errors import HvdscaleError
from hvdscale.strategies import sparse_exchange
from tests.exactness import (
    adapter,
    check_exact,
    config,
    distributed,
    rel_change,
    worker_params,
    worker_steps,
)

OPTIMIZERS = {"sgd": ("optim.name=sgd", "optim.lr=0.5"),
              "momentum": ("optim.name=momentum", "optim.lr=0.3"),
              "adam": ("optim.name=adam", "optim.lr=0.01")}
ADAM_FACTOR = 10
"""Adam's tolerance against one process, in units of the framework's (see ``run_pair``);
sparse against dense stays at the framework's own."""
EPOCH = ("model.src_vocab=300", "model.tgt_vocab=200", "data.bucketing.enabled=true",
         "data.bucketing.boundaries=[4,7,10]", "data.synthetic.max_len=14",
         "data.synthetic.sentences_per_rank=40", "measure.epochs=1", "measure.warmup_steps=0")
"""A whole epoch of bucketed, uneven batches (some rank idles at the end) over vocabularies
large enough that every step leaves most rows untouched."""


def sparse_config(framework: str, strategy: str, optim: str, *extra: str) -> Any:
    """The tiny NMT run of tests/exactness.py over one epoch with ``optim``."""
    return config(framework, strategy, *OPTIMIZERS[optim], *EPOCH, *extra)


def check_data(steps: list[list]) -> None:
    """The data has what the cases need: an idle step, repeated ids in a batch, and ids that
    only one worker's batch touches in a step."""
    assert any(None in s for s in steps), "some rank should run out of batches"
    repeated = only_one = False
    for parts in steps:
        ids = [np.unique(b.src) for b in parts if b is not None]
        repeated |= any(np.unique(b.src[b.src > 0]).size < (b.src > 0).sum()
                        for b in parts if b is not None)
        if len(ids) > 1:
            only_one |= bool(np.setdiff1d(ids[0], np.concatenate(ids[1:])).size)
    assert repeated and only_one


def run_pair(cfg_sparse: Any, cfg_dense: Any, world: Any, nworkers_of: Any,
             tol: float) -> dict:
    """Train sparse and dense; assert both are exact and agree on the change; returns the
    sparse strategy's record facts."""
    got, strat = distributed(cfg_sparse, world)
    got = worker_params(world, strat, got) if hasattr(strat, "num_workers") else got
    dense, dstrat = distributed(cfg_dense, world)
    dense = worker_params(world, dstrat, dense) if hasattr(dstrat, "num_workers") else dense
    n = nworkers_of(strat)
    steps = worker_steps(cfg_sparse, n)
    if n > 1:  # one worker (dedicated server at np=2): nothing uneven, idle or unshared
        check_data(steps)
    # Adam divides by the root of its second moment, which magnifies float32 rounding in rows
    # with tiny gradients: the dense path itself is 2.5e-5 from one process after an epoch.
    adam = cfg_sparse.optim.name == "adam"
    check_exact(cfg_sparse, got, n, tol * ADAM_FACTOR if adam else tol, steps)
    init = adapter(cfg_sparse).params_buffer().astype(np.float64)
    assert rel_change(got, dense, init) < tol, "sparse and dense changed the parameters apart"
    return strat.info()


def gathered_pair(framework: str, optim: str, world: Any, monkeypatch: Any, tol: float,
                  *extra: str) -> dict:
    """Horovod ``embedding_grads=gathered`` against ``dense``; asserts the embedding gradients
    really travelled as rows: a spy on Horovod's allgather (what its sparse reduction of a
    PyTorch sparse tensor or a TensorFlow IndexedSlices runs) must see calls on this rank.
    PyTorch's spy counts only the sparse reductions' allgathers, by name: under ``horovodrun
    --gloo`` the schedule's object allgather runs through the same function."""
    calls: list[str] = []
    seen: list[str] = []
    own: tuple[str, ...] = ()  # TensorFlow's two allgathers are unnamed: every call counts
    if framework == "torch":
        import horovod.torch.mpi_ops as ops  # hvd: sparse_allreduce_async calls it by name
        from torch import nn

        from hvdscale.frameworks.torch.sparse import SPARSE_NAME

        # after-backward names its reductions SPARSE_NAME.<i>; with overlap=hooks Horovod's
        # DistributedOptimizer names each by its parameter, the embedding's weight.
        model = adapter(sparse_config(framework, "horovod", optim, *extra)).model
        own = (f"{SPARSE_NAME}.", *(f"{n}.weight." for n, m in model.named_modules()
                                     if isinstance(m, nn.Embedding)))
        attr = "allgather_async"
    else:
        import horovod.tensorflow as ops  # hvd: allreduce of IndexedSlices calls it by name

        attr = "allgather"
    real = getattr(ops, attr)

    def spy(*args: Any, **kwargs: Any) -> Any:
        name = str(kwargs.get("name"))
        seen.append(name)
        # sparse_allreduce_async gathers <name>.indices and <name>.values
        if not own or (name.startswith(own) and name.endswith((".indices", ".values"))):
            calls.append(name)
        return real(*args, **kwargs)

    monkeypatch.setattr(ops, attr, spy)
    gathered = ("strategy.horovod.embedding_grads=gathered", *extra)
    info = run_pair(sparse_config(framework, "horovod", optim, *gathered),
                    sparse_config(framework, "horovod", optim, *extra), world,
                    lambda s: world.size, tol)
    assert info["embedding_grads"] == "gathered"
    assert calls, ("no sparse allgather ran: the embedding gradients were not sent as rows "
                   f"(allgathers seen: {sorted(set(seen))})")
    return info


def ps_pair(framework: str, optim: str, placement: str, servers: int, world: Any,
            tol: float, *extra: str) -> dict:
    """The parameter server with ``sparse_embeddings=on`` against ``off`` (``extra``: more
    settings for both)."""
    if placement == "dedicated" and servers >= world.size:
        pytest.skip("no worker left")
    ps = ("strategy.ps.placement=" + placement, f"strategy.ps.num_servers={servers}", *extra)
    info = run_pair(sparse_config(framework, "ps", optim, *ps, "strategy.ps.sparse_embeddings=on"),
                    sparse_config(framework, "ps", optim, *ps), world,
                    lambda s: s.num_workers, tol)
    sx = info["sparse_embeddings"]
    assert sx["active"] and sx["choices"]["sparse_pushes"] > 0
    assert sx["pull"] == ("changed rows (plain SGD)" if optim == "sgd" else "all rows")
    assert sx["bytes_per_step"]["push_bytes"] < sx["bytes_per_step"]["dense_push_bytes"]
    return info


def bad_push(framework: str, world: Any, monkeypatch: Any, what: str,
             who: int | None = None) -> None:
    """One worker (rank ``who``; None: the last) pushes rows out of range (``range``), a row id
    twice (``repeat``) or values of the wrong width (``shape``): every rank raises the same
    clear error, and the ranks can talk after it."""
    cfg = sparse_config(framework, "ps", "sgd", "strategy.ps.sparse_embeddings=on")
    if world.rank == (world.size - 1 if who is None else who):
        if what in ("range", "repeat"):  # a token id past the table, or one sent twice
            def touched_rows(self: Any, batch: Any) -> list[np.ndarray]:
                return [np.append(ids, t.rows if what == "range" else ids[-1]) for ids, t in
                        zip(self.embeddings.touched(batch), self.embedding_tables(), strict=True)]
            monkeypatch.setattr(type(adapter(cfg)), "touched_rows", touched_rows)
        else:
            real_rows = sparse_exchange.gather_rows
            monkeypatch.setattr(sparse_exchange, "gather_rows",
                                lambda b, i, d: real_rows(b, i, d)[:, 1:].copy())
    with pytest.raises(HvdscaleError) as err:
        distributed(cfg, world)
    msg = str(err.value)
    assert "parameter server: bad sparse push or reply: rank " in msg, msg
    assert {"range": "outside rows [0, ", "repeat": "not strictly increasing",
            "shape": "expected"}[what] in msg
    assert world.allgather(msg) == [msg] * world.size  # the same error on every rank
