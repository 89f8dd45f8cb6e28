"""One parameter-server step with embedding gradients sent as (unique row ids, summed rows).

Push (worker to the server of each shard, non-blocking): an int64 header with the number of
dense pieces and, per embedding segment of the shard, the number of rows sent sparse (-1: the
segment is sent dense), then the dense pieces, then per embedding segment either its ids and
gathered rows or its dense block, then the token count. The server reads the actual sizes with
``Probe`` before receiving and checks every push (a header that does not match its layout: it
takes every message of that push up to the token count, never probing for a segment that may
not come; ids in range, values matching ids x width, dense blocks whole, the token count a
whole number >= 0). A server that found a problem leaves its shard as it was but still replies;
workers check the replies (header, row ids in range: a negative id would wrap); then all ranks
agree on the outcome with one small allreduce, so a bad message is one clear error on every
rank, never a truncation on one rank and a hang on the others.

Merge (server): the dense pieces are summed over workers in worker order, the embedding segments
start from zero and get each worker's rows added (``np.add.at``, so a repeated id is summed, as
are the same ids from different workers); one division by the global token count gives the
token-weighted mean gradient, and the optimizer updates the whole shard: momentum and Adam decay
every row exactly as the dense update would.

Pull: with an optimizer that leaves a row with zero gradient unchanged (plain SGD), an embedding
segment whose touched rows (the union over workers) pass the sparse rule is sent as those rows
only; otherwise, and for momentum and Adam, every row. A header tells the worker which.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hvdscale.errors import HvdscaleError
from hvdscale.strategies.sparse_rows import (
    EmbeddingTable,
    Segment,
    gather_rows,
    goes_sparse,
    local_ids,
    segments,
    sparse_bytes,
)

HDR_TAG, DENSE_TAG, IDS_TAG, ROWS_TAG, TOK_TAG = 111, 112, 113, 114, 115
PHDR_TAG, PDENSE_TAG, PIDS_TAG, PROWS_TAG = 121, 122, 123, 124
BAD = -2
"""Header value of a segment whose push the worker found malformed (sent empty)."""


class SparseExchange:
    """The parameter server's step when embedding gradients may travel sparse.

    Args:
        ps: the ``ParameterServer`` (its communicator, placement, shards, buffers, optimizer).
        tables: the adapter's embedding tables.
        mode: ``auto`` or ``on`` (``strategy.ps.sparse_embeddings``).
        sparse_pull: whether untouched rows stay unchanged under the optimizer (plain SGD).
    """

    def __init__(self, ps: Any, tables: list[EmbeddingTable], mode: str,
                 sparse_pull: bool) -> None:
        self.ps, self.tables, self.mode, self.sparse_pull = ps, tables, mode, sparse_pull
        self.segs = [segments(lo, hi, tables) for lo, hi in ps.shards]
        self.stats = {"steps": 0, "push_bytes": 0, "pull_bytes": 0, "dense_push_bytes": 0,
                      "dense_pull_bytes": 0, "sparse_pushes": 0, "dense_pushes": 0,
                      "sparse_pulls": 0, "dense_pulls": 0}

    # --- worker side ---------------------------------------------------------------------

    def push(self, touched: list[np.ndarray],
             tokens: np.ndarray) -> tuple[list[Any], list[str]]:
        """Post this worker's pushes to every server; returns the requests (buffers kept) and
        the problems found in its own push (a segment with a problem is announced as ``BAD``
        and sent empty, so every server still gets a whole push and nobody waits)."""
        ps, reqs, problems = self.ps, [], []
        grads = ps.grads
        for t, ids in zip(self.tables, touched, strict=True):
            if ids.size and (ids[0] < 0 or ids[-1] >= t.rows):
                problems.append(f"rank {ps.rank} pushed row ids {int(ids[0])}..{int(ids[-1])} "
                                f"of {t.name}, outside rows [0, {t.rows})")
        bad_tables = {i for i, ids in enumerate(touched)
                      if ids.size and (ids[0] < 0 or ids[-1] >= self.tables[i].rows)}
        for s, segs in zip(ps.servers, self.segs, strict=True):
            sends = []
            hdr = []
            for g in segs:
                if not g.sparse_capable:
                    sends.append((grads[g.lo:g.hi], DENSE_TAG))
                    continue
                i = local_ids(touched[g.table], g)
                if g.table in bad_tables:
                    hdr.append(BAD)
                elif not goes_sparse(self.mode, len(i), g):
                    hdr.append(-1)
                    sends.append((grads[g.lo:g.hi], ROWS_TAG))
                else:
                    rows = gather_rows(grads[g.lo:g.hi], i, g.dim)
                    if rows.shape != (len(i), g.dim):
                        problems.append(f"rank {ps.rank} pushed rows of shape {rows.shape} "
                                        f"for {len(i)} ids of {self.tables[g.table].name} "
                                        f"(expected {len(i)} x {g.dim})")
                        hdr.append(BAD)
                        continue
                    hdr.append(len(i))
                    sends += [(i, IDS_TAG), (rows, ROWS_TAG)]
            head = np.array([len(segs) - len(hdr), *hdr], dtype=np.int64)  # dense pieces first
            for buf, tag in [(head, HDR_TAG), *sends, (tokens, TOK_TAG)]:
                reqs.append((ps.comm.Isend(buf, dest=s, tag=tag), buf))  # hvd:
        return reqs, problems

    def pull(self) -> list[str]:
        """Receive the updated shards (all rows, or the changed rows) into the parameters;
        returns the problems found in the servers' replies (a header of the wrong length or
        count, row ids outside the segment): those rows are not written."""
        ps, problems = self.ps, []
        params = ps.params
        for s, segs in zip(ps.servers, self.segs, strict=True):
            emb = [g for g in segs if g.sparse_capable]
            hdr = self._recv_probed(s, PHDR_TAG, np.int64)
            if len(hdr) != len(emb) or any(k > g.rows or k < -1
                                           for k, g in zip(hdr, emb, strict=True)):
                problems.append(f"rank {ps.rank} got a reply header {hdr[:8].tolist()} from "
                                f"server {s} for {len(emb)} embedding segments")
                continue
            reqs = [ps.comm.Irecv(params[g.lo:g.hi], source=s, tag=PDENSE_TAG)  # hvd:
                    for g in segs if not g.sparse_capable]
            scatter = []
            for k, g in zip(hdr, emb, strict=True):
                view = params[g.lo:g.hi]
                if k < 0:
                    reqs.append(ps.comm.Irecv(view, source=s, tag=PROWS_TAG))  # hvd:
                    continue
                ids = np.empty(k, dtype=np.int64)
                rows = np.empty((k, g.dim), dtype=params.dtype)
                reqs.append(ps.comm.Irecv(ids, source=s, tag=PIDS_TAG))  # hvd:
                reqs.append(ps.comm.Irecv(rows, source=s, tag=PROWS_TAG))  # hvd:
                scatter.append((view.reshape(-1, g.dim), ids, rows, g))
            ps.MPI.Request.Waitall(reqs)
            for view2d, ids, rows, g in scatter:
                if ids.size and (ids.min() < 0 or ids.max() >= g.rows):  # negative ids wrap
                    problems.append(f"rank {ps.rank} got row ids {int(ids.min())}.."
                                    f"{int(ids.max())} of {self.tables[g.table].name} from "
                                    f"server {s}, outside its rows [0, {g.rows})")
                    continue
                view2d[ids] = rows
        return problems

    # --- server side ---------------------------------------------------------------------

    def receive(self) -> tuple[list[Any], list[str]]:
        """Receive every worker's push for this server's shard; returns the pushes and the
        problems found (empty: all pushes are well formed)."""
        ps = self.ps
        segs, lo = self.segs[ps.rank], ps.shards[ps.rank][0]
        emb = [g for g in segs if g.sparse_capable]
        pushes, problems = [], []
        for i, w in enumerate(ps.workers):
            hdr = self._recv_probed(w, HDR_TAG, np.int64)
            if len(hdr) != 1 + len(emb) or hdr[0] != len(segs) - len(emb):
                # Another layout: what follows cannot be matched to segments, and probing for
                # a segment that never comes would block; take everything up to the tokens.
                problems.append(f"rank {w} pushed a header for {hdr[:1].tolist()} dense "
                                f"pieces and {len(hdr) - 1} embedding segments; server "
                                f"{ps.rank} owns {len(segs) - len(emb)} and {len(emb)}")
                self._drain(w, i, problems)
                pushes.append(([False], [(None, None)] * len(emb)))
                continue
            dense = [self._recv_into(ps.recv[i][g.lo - lo:g.hi - lo], w, DENSE_TAG, problems)
                     for g in segs if not g.sparse_capable]
            parts = [self._recv_segment(int(k), g, w, problems)
                     for k, g in zip(hdr[1:], emb, strict=True)]
            self._recv_tokens(w, i, self._recv_probed(w, TOK_TAG, np.float64), problems)
            pushes.append((dense, parts))
        return pushes, problems

    def _drain(self, src: int, i: int, problems: list[str]) -> None:
        """Receive every message of ``src``'s push, whatever its tag, up to its token count
        (the push's last message; the next push comes only after this step's agreement)."""
        ps, status = self.ps, self.ps.MPI.Status()
        while True:
            ps.comm.Probe(source=src, tag=ps.MPI.ANY_TAG, status=status)  # hvd:
            buf = np.empty(status.Get_count(ps.MPI.BYTE), dtype=np.uint8)
            tag = status.Get_tag()
            ps.comm.Recv(buf, source=src, tag=tag)  # hvd:
            if tag == TOK_TAG:
                self._recv_tokens(src, i, buf.view(np.float64) if buf.size % 8 == 0
                                  else np.empty(0), problems)
                return

    def _recv_tokens(self, src: int, i: int, got: np.ndarray, problems: list[str]) -> None:
        """Keep worker ``src``'s token count if it is one whole, finite, non-negative number."""
        bad = token_problem(src, got)
        if bad:
            problems.append(bad)
            got = np.zeros(1)
        self.ps.tokens_in[i] = got[0]

    def _recv_probed(self, src: int, tag: int, dtype: Any) -> np.ndarray:
        """Receive a message of whatever size was sent."""
        ps = self.ps
        status = ps.MPI.Status()
        ps.comm.Probe(source=src, tag=tag, status=status)  # hvd:
        buf = np.empty(status.Get_count(ps.MPI.BYTE) // np.dtype(dtype).itemsize, dtype=dtype)
        ps.comm.Recv(buf, source=src, tag=tag)  # hvd:
        return buf

    def _recv_into(self, view: np.ndarray, src: int, tag: int, problems: list[str]) -> bool:
        got = self._recv_probed(src, tag, view.dtype)
        if got.size != view.size:
            problems.append(f"rank {src} pushed {got.size} values for a block of {view.size}")
            return False
        view[:] = got
        return True

    def _recv_segment(self, k: int, g: Segment, src: int, problems: list[str]) -> Any:
        """One embedding segment of one worker: (ids, rows) sparse or a dense block."""
        name = self.tables[g.table].name
        if k == BAD:  # the worker reports it in ``agree``; nothing follows for this segment
            return None, None
        if k < 0:
            rows = self._recv_probed(src, ROWS_TAG, np.float32)
            if rows.size != g.hi - g.lo:
                problems.append(f"rank {src} pushed {rows.size} values for the dense rows "
                                f"of {name} ({g.rows} x {g.dim})")
            return None, rows
        ids = self._recv_probed(src, IDS_TAG, np.int64)
        rows = self._recv_probed(src, ROWS_TAG, np.float32)
        if ids.size != k or rows.size != k * g.dim:
            problems.append(f"rank {src} pushed {ids.size} row ids and {rows.size} values "
                            f"for {name} (expected {k} ids and {k} x {g.dim} values)")
        elif k and (ids.min() < 0 or ids.max() >= g.rows):
            bad = int(ids.min()) if ids.min() < 0 else int(ids.max())
            problems.append(f"rank {src} pushed row id {g.row0 + bad} of {name}, outside "
                            f"rows [{g.row0}, {g.row0 + g.rows}) of server {self.ps.rank}")
        elif k > 1 and not np.all(np.diff(ids) > 0):  # np.add.at would sum a repeat twice
            problems.append(f"rank {src} pushed row ids of {name} that are not strictly "
                            f"increasing (repeated or unsorted)")
        return ids, rows.reshape(-1, g.dim) if rows.size % g.dim == 0 else rows

    def merge(self, pushes: list[Any]) -> list[np.ndarray | None]:
        """Sum the pushes into the optimizer's gradient (not yet divided); returns, per
        embedding segment, the union of touched rows (None: some worker sent it dense)."""
        ps = self.ps
        segs, lo = self.segs[ps.rank], ps.shards[ps.rank][0]
        grad = ps.opt.grad
        for g in segs:
            if not g.sparse_capable:
                np.sum(ps.recv[:, g.lo - lo:g.hi - lo], axis=0, out=grad[g.lo - lo:g.hi - lo])
        unions: list[np.ndarray | None] = []
        for j, g in enumerate(s for s in segs if s.sparse_capable):
            view = grad[g.lo - lo:g.hi - lo]
            view.fill(0.0)
            view2d = view.reshape(-1, g.dim)
            seen: list[np.ndarray] | None = []
            for _, parts in pushes:
                ids, rows = parts[j]
                if ids is None:
                    view += rows
                    seen = None
                else:
                    np.add.at(view2d, ids, rows)
                    if seen is not None:
                        seen.append(ids)
            unions.append(None if seen is None else
                          np.unique(np.concatenate([np.empty(0, np.int64), *seen])))
        return unions

    def send_params(self, unions: list[np.ndarray | None]) -> list[Any]:
        """Post the updated shard to every worker: dense pieces, then each embedding segment's
        changed rows (plain SGD, rule permitting) or all its rows."""
        ps = self.ps
        segs, lo = self.segs[ps.rank], ps.shards[ps.rank][0]
        emb = [g for g in segs if g.sparse_capable]
        shard = ps.shard
        hdr = np.array([len(u) if self.sparse_pull and u is not None
                        and goes_sparse(self.mode, len(u), g) else -1
                        for u, g in zip(unions, emb, strict=True)], dtype=np.int64)
        payload: list[tuple[np.ndarray, int]] = [(hdr, PHDR_TAG)]
        payload += [(shard[g.lo - lo:g.hi - lo], PDENSE_TAG) for g in segs
                    if not g.sparse_capable]
        for k, u, g in zip(hdr, unions, emb, strict=True):
            view = shard[g.lo - lo:g.hi - lo]
            if k < 0:
                payload.append((view, PROWS_TAG))
            else:
                payload.append((u, PIDS_TAG))
                payload.append((gather_rows(view, u, g.dim), PROWS_TAG))
        self._count_pull(hdr, emb, len(ps.workers))
        return [(ps.comm.Isend(buf, dest=w, tag=tag), buf)  # hvd:
                for w in ps.workers for buf, tag in payload]

    def count_push(self, pushes: list[Any]) -> None:
        """Add this step's received bytes (as sent, and as the dense push would have been)."""
        st, segs = self.stats, self.segs[self.ps.rank]
        dense_bytes = sum(g.hi - g.lo for g in segs if not g.sparse_capable) * 4
        emb = [g for g in segs if g.sparse_capable]
        st["steps"] += 1
        for _, parts in pushes:
            st["push_bytes"] += dense_bytes
            st["dense_push_bytes"] += dense_bytes + sum((g.hi - g.lo) * 4 for g in emb)
            for (ids, rows), g in zip(parts, emb, strict=True):
                sparse = ids is not None
                st["push_bytes"] += sparse_bytes(ids.size, g.dim) if sparse else rows.nbytes
                st["sparse_pushes" if sparse else "dense_pushes"] += 1

    def _count_pull(self, hdr: np.ndarray, emb: list[Segment], workers: int) -> None:
        st, segs = self.stats, self.segs[self.ps.rank]
        dense_bytes = sum(g.hi - g.lo for g in segs if not g.sparse_capable) * 4
        sent = dense_bytes + sum(sparse_bytes(int(k), g.dim) if k >= 0 else (g.hi - g.lo) * 4
                                 for k, g in zip(hdr, emb, strict=True))
        st["pull_bytes"] += workers * sent
        st["dense_pull_bytes"] += workers * (dense_bytes + sum((g.hi - g.lo) * 4 for g in emb))
        st["sparse_pulls"] += int((hdr >= 0).sum()) * workers
        st["dense_pulls"] += int((hdr < 0).sum()) * workers


def token_problem(src: int, got: np.ndarray) -> str | None:
    """What is wrong with worker ``src``'s token-count message (None: one whole, finite,
    non-negative number): a NaN or negative count would silently skip the update."""
    if got.size != 1:
        return f"rank {src} pushed {got.size} token counts (expected 1)"
    t = float(got[0])
    if not np.isfinite(t) or t < 0 or t != int(t):
        return f"rank {src} pushed token count {t!r}: not a whole number >= 0"
    return None


def agree(comm: Any, problems: list[str], what: str = "bad sparse push") -> None:
    """Every rank learns whether any rank found a problem; all raise the same error."""
    if comm.allreduce(1 if problems else 0) == 0:  # hvd: one small allreduce per step
        return
    everyone = comm.allgather(problems)  # hvd:
    first = next(p for ps in everyone for p in ps)
    raise HvdscaleError(f"parameter server: {what}: {first}")
