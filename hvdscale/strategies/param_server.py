"""Synchronous parameter server on MPI (mpi4py), parameters partitioned among servers.

The flat parameter buffer is cut into ``num_servers`` contiguous, size-balanced shards; server s
owns shard s and its optimizer state. Each step every worker pushes each shard of its gradient
(of its *summed* token loss) and its token count to the shard's server; a server sums the
gradients of all workers, divides by the global token count (so the update is what one process
computes on the union of the batches), applies the optimizer, and sends the updated shard back.

All traffic uses mpi4py's uppercase, buffer-based calls on contiguous numpy views of the
adapter's flat buffers (no pickling; no copies on the worker side with PyTorch, whose buffers are
the model's memory; TensorFlow's adapter copies gradients out and parameters back in, once per
step each); every transfer is non-blocking, so pushes to and pulls from different servers
proceed at the same time. Written once against ``frameworks.base.Adapter`` for both frameworks.
Nothing received is believed unchecked: a server checks each push's received count
(``MPI.Status``: MPI accepts a shorter message into a larger buffer) and token count (a NaN or
negative count would silently skip the update), and all ranks agree on the outcome with one
small allreduce per step before any update, so a bad push is one clear error on every rank.

Placements: ``colocated``: every rank computes, ranks 0..S-1 also serve. ``dedicated``: ranks
0..S-1 only serve; ranks S.. compute.

Sparse embeddings (``sparse_embeddings`` auto/on): shard boundaries are moved to row boundaries
of the embedding tables (a large table spreads over servers by rows; the record lists each
server's rows), and the step is ``sparse_exchange.SparseExchange``'s: embedding gradients go as
(unique row ids, summed rows), the server merges them and updates densely (exact for every
optimizer), and with plain SGD pulls carry only the changed rows.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from hvdscale.config import PSConfig
from hvdscale.corpora.corpus import Batch
from hvdscale.strategies.base import Adapter, Strategy
from hvdscale.strategies.sparse_exchange import SparseExchange, agree, token_problem
from hvdscale.strategies.sparse_rows import align_bounds, check_tables, row_ranges

GRAD_TAG, TOKENS_TAG, PARAM_TAG = 101, 102, 103


def partition(n: int, num_servers: int) -> list[tuple[int, int]]:
    """Contiguous [lo, hi) shards of ``n`` elements whose sizes differ by at most one."""
    base, extra = divmod(n, num_servers)
    bounds, lo = [], 0
    for s in range(num_servers):
        hi = lo + base + (1 if s < extra else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds


class ParameterServer(Strategy):
    """See the module docstring."""

    name = "ps"

    def __init__(self, cfg: PSConfig, world: Any) -> None:
        from mpi4py import MPI

        self.MPI = MPI
        self.cfg = cfg
        self.comm = world.comm
        self.rank, self.size = world.rank, world.size
        s = cfg.num_servers
        self.servers = list(range(s))
        self.workers = list(range(s, self.size)) if cfg.placement == "dedicated" \
            else list(range(self.size))
        self.serves = self.rank < s
        self.computes = self.rank in self.workers
        self.worker_index = self.workers.index(self.rank) if self.computes else 0
        self.num_workers = len(self.workers)
        self.comm_times: list[float] = []
        self.server_compute_times: list[float] = []

    def setup(self, adapter: Adapter) -> None:
        super().setup(adapter)
        self.params = adapter.params_buffer()
        self.grads = adapter.grads_buffer()
        self.shards = partition(self.params.size, len(self.servers))
        self.sparse: SparseExchange | None = None
        self.tables = adapter.embedding_tables() if self.cfg.sparse_embeddings != "off" else []
        if self.tables:
            check_tables(self.tables, self.params.size)
            self.shards = align_bounds(self.shards, self.tables)
        if self.serves:
            lo, hi = self.shards[self.rank]
            # The server's own copy of its shard: it owns these values and their optimizer
            # state; colocated, its worker half receives them like any other worker.
            self.shard = self.params[lo:hi].copy()
            self.opt = adapter.shard_optimizer(self.shard)
            self.recv = np.empty((self.num_workers, hi - lo), dtype=self.params.dtype)
            self.tokens_in = np.zeros((self.num_workers, 1), dtype=np.float64)
        self.tokens_out = np.zeros(1, dtype=np.float64)
        if self.tables:
            # Every rank knows the optimizer kind: a serve-only rank tells the workers by
            # example (rank 0 always serves, so its shard optimizer decides for all).
            keeps = bool(self.opt.keeps_zero_grad_rows) if self.rank == 0 else False
            keeps = self.comm.bcast(keeps, root=0)  # hvd:
            self.sparse = SparseExchange(self, self.tables, self.cfg.sparse_embeddings, keeps)
        # Initial pull: every worker starts from the servers' parameters.
        self._exchange(push=False)
        if self.computes:
            adapter.params_changed()

    def _server_push_params(self) -> list[Any]:
        return [self.comm.Isend(self.shard, dest=w, tag=PARAM_TAG) for w in self.workers]

    def _worker_pull(self) -> list[Any]:
        return [self.comm.Irecv(self.params[lo:hi], source=s, tag=PARAM_TAG)
                for s, (lo, hi) in zip(self.servers, self.shards, strict=True)]

    def _exchange(self, push: bool) -> None:
        """One round: (push gradients, servers check them, all ranks agree,) servers update,
        workers pull parameters."""
        worker_reqs: list[Any] = []
        problems: list[str] = []
        if push:
            if self.computes:
                for s, (lo, hi) in zip(self.servers, self.shards, strict=True):
                    worker_reqs.append(self.comm.Isend(self.grads[lo:hi], dest=s, tag=GRAD_TAG))
                    worker_reqs.append(self.comm.Isend(self.tokens_out, dest=s, tag=TOKENS_TAG))
            if self.serves:
                problems = self._receive_pushes()
            # A short or malformed push is one error on every rank, before any update.
            agree(self.comm, problems, "bad push")
        if self.computes:
            worker_reqs += self._worker_pull()
        if self.serves:
            if push:
                t = time.perf_counter()
                total_tokens = float(self.tokens_in.sum())
                # Sum in worker order, then one division: the token-weighted mean gradient.
                # No tokens at all (no worker had a batch): no update, as one process would do.
                if total_tokens > 0:
                    np.sum(self.recv, axis=0, out=self.opt.grad)
                    self.opt.grad /= total_tokens
                    self.opt.step()
                self.server_compute_times.append(time.perf_counter() - t)
            self.MPI.Request.Waitall(self._server_push_params())
        self.MPI.Request.Waitall(worker_reqs)

    def _receive_pushes(self) -> list[str]:
        """Every worker's gradient shard and token count, each checked: received counts (MPI
        accepts a shorter message into a larger buffer, leaving stale values) and the token
        count's value; returns the problems found."""
        MPI, lo, hi = self.MPI, *self.shards[self.rank]
        reqs = []
        for i, w in enumerate(self.workers):
            reqs.append(self.comm.Irecv(self.recv[i], source=w, tag=GRAD_TAG))
            reqs.append(self.comm.Irecv(self.tokens_in[i], source=w, tag=TOKENS_TAG))
        statuses = [MPI.Status() for _ in reqs]
        try:
            MPI.Request.Waitall(reqs, statuses)
        except MPI.Exception as e:  # a longer message than the buffer: truncated
            return [f"server {self.rank} got a push longer than its buffer "
                    f"({e.Get_error_string()})"]
        problems = []
        for i, w in enumerate(self.workers):
            got = statuses[2 * i].Get_count(MPI.BYTE) // self.recv.itemsize
            if got != hi - lo:
                problems.append(f"rank {w} pushed {got} gradient values for server "
                                f"{self.rank}'s shard of {hi - lo}")
            n = statuses[2 * i + 1].Get_count(MPI.BYTE) // 8
            bad = token_problem(w, self.tokens_in[i][:n])
            if bad:
                problems.append(bad)
        return problems

    def _sparse_exchange(self, touched: list[np.ndarray]) -> None:
        """One round with sparse embedding gradients (``SparseExchange``): a server that found
        a bad push leaves its shard as it was but still replies, so nobody waits, and every
        rank raises the same error at the one agreement after the pull."""
        sx = self.sparse
        assert sx is not None
        sends, problems = sx.push(touched, self.tokens_out) if self.computes else ([], [])
        replies: list[Any] = []
        if self.serves:
            pushes, found = sx.receive()
            problems += found
            whole = not found and all(ids is not None or rows is not None
                                      for _, parts in pushes for ids, rows in parts)
            t = time.perf_counter()
            unions: list[Any] = [None] * sum(g.sparse_capable for g in sx.segs[self.rank])
            if whole:
                sx.count_push(pushes)
                unions = sx.merge(pushes)
                total_tokens = float(self.tokens_in.sum())
                if total_tokens > 0:  # as the dense path: no tokens anywhere, no update
                    self.opt.grad /= total_tokens
                    self.opt.step()
            self.server_compute_times.append(time.perf_counter() - t)
            replies = sx.send_params(unions)
        if self.computes:
            problems += sx.pull()
        self.MPI.Request.Waitall([r for r, _ in sends])
        agree(self.comm, problems, "bad sparse push or reply")
        self.MPI.Request.Waitall([r for r, _ in replies])

    def step(self, batch: Batch | None) -> float:
        loss = 0.0
        touched: list[np.ndarray] = []
        if self.computes:
            # A worker without a batch pushes zero gradients and zero tokens: exact.
            self.adapter.zero_grad()
            if batch is not None:
                loss = self.adapter.forward_backward(batch, 1.0)
            self.tokens_out[0] = batch.loss_tokens if batch is not None else 0
            self.grads = self.adapter.grads_buffer()  # same array; refreshed where copied
            if self.sparse is not None:
                empty = np.empty(0, dtype=np.int64)
                touched = self.adapter.touched_rows(batch) if batch is not None \
                    else [empty for _ in self.tables]
        t = time.perf_counter()
        with self.communicating():
            if self.sparse is not None:
                self._sparse_exchange(touched)
            else:
                self._exchange(push=True)
        self.comm_times.append(time.perf_counter() - t)
        if self.computes:
            self.adapter.params_changed()
        return loss

    def info(self) -> dict[str, Any]:
        itemsize = self.params.dtype.itemsize
        ct = np.array(self.comm_times) if self.comm_times else np.array([np.nan])
        return {"name": self.name, "placement": self.cfg.placement,
                "num_servers": len(self.servers), "servers": self.servers,
                "workers": self.workers,
                "bytes_per_server": [(hi - lo) * itemsize for lo, hi in self.shards],
                "comm_time_median_s": float(np.median(ct)),
                "server_update_median_s": float(np.median(self.server_compute_times))
                if self.server_compute_times else None,
                "shards": [list(b) for b in self.shards],
                "sparse_embeddings": self._sparse_info()}

    def finish(self) -> None:
        # Every server's byte counts, summed on every rank for the record (all call finish).
        stats = self.sparse.stats if self.sparse is not None and self.serves else None
        everyone = self.comm.allgather(stats)  # hvd:
        if self.sparse is not None:
            self.sparse_totals = {k: sum(st[k] for st in everyone if st is not None)
                                  for k in self.sparse.stats}
            self.sparse_totals["steps"] = everyone[0]["steps"]  # rank 0 always serves

    def _sparse_info(self) -> dict[str, Any]:
        """The record's sparse-merging facts: the mode, the rule, who owns which rows, and
        the bytes per step pushed and pulled against what dense transfers would have taken."""
        if self.sparse is None:
            return {"mode": self.cfg.sparse_embeddings, "active": False}
        from hvdscale.strategies.sparse_rows import AUTO_MAX_SHARE

        tot = getattr(self, "sparse_totals", self.sparse.stats)
        steps = max(1, tot["steps"])
        per = {k: tot[k] / steps for k in ("push_bytes", "dense_push_bytes", "pull_bytes",
                                            "dense_pull_bytes")}
        return {"mode": self.cfg.sparse_embeddings, "active": True,
                "rule": f"sparse when ids + rows <= {AUTO_MAX_SHARE} x dense bytes "
                        "(auto; on: always)",
                "tables": [vars(t) for t in self.tables],
                "row_ranges": row_ranges(self.shards, self.tables),
                "pull": "changed rows (plain SGD)" if self.sparse.sparse_pull else "all rows",
                "bytes_per_step": per, "choices": {k: tot[k] for k in (
                    "sparse_pushes", "dense_pushes", "sparse_pulls", "dense_pulls")},
                "steps": tot["steps"]}
