"""The parameter server believes nothing it receives unchecked (issue 29, finding 8): a shorter
dense gradient, a token count that is NaN, negative or fractional, a sparse header of the wrong
length (the server must not block in Probe), and row ids from a server outside the segment
(negative ids would wrap) are each one clear error on every rank, with no hang, and the ranks
can talk after it. The faults are made on one rank by wrapping its communicator (the real
MPI messages still travel)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hvdscale.core.world import is_gloo_launch
from hvdscale.errors import HvdscaleError
from hvdscale.strategies import param_server, sparse_exchange
from tests.exactness import config, distributed
from tests.sparse_cases import sparse_config

pytestmark = [pytest.mark.np3, pytest.mark.skipif(
    is_gloo_launch(), reason="the parameter server needs an MPI launch")]


class Tamper:
    """``comm`` whose ``Isend`` passes each buffer through ``change(buf, tag)`` (None: the
    message is not sent at all); everything else is the real communicator's."""

    def __init__(self, comm: Any, change: Any) -> None:
        self._comm, self._change = comm, change

    def __getattr__(self, name: str) -> Any:
        return getattr(self._comm, name)

    def Isend(self, buf: Any, dest: int, tag: int) -> Any:
        buf = self._change(buf, tag)
        if buf is None:  # dropped: a request that is already complete
            from mpi4py import MPI

            return MPI.REQUEST_NULL
        return self._comm.Isend(buf, dest=dest, tag=tag)


def _one_error_everywhere(cfg: Any, world: Any, *expected: str) -> None:
    with pytest.raises(HvdscaleError) as err:
        distributed(cfg, world)
    msg = str(err.value)
    assert all(e in msg for e in expected), msg
    assert world.allgather(msg) == [msg] * world.size  # the same error on every rank
    assert world.allgather(world.rank) == list(range(world.size))  # and they still talk


def _tamper_dense(world: Any, monkeypatch: pytest.MonkeyPatch, change: Any) -> None:
    """The last rank's dense pushes go through ``change``."""
    if world.rank != world.size - 1:
        return
    real = param_server.ParameterServer._exchange

    def exchange(self: Any, push: bool) -> None:
        comm, self.comm = self.comm, Tamper(self.comm, change)
        try:
            real(self, push)
        finally:
            self.comm = comm

    monkeypatch.setattr(param_server.ParameterServer, "_exchange", exchange)


def test_shorter_dense_gradient_is_an_error(comm_world, monkeypatch) -> None:
    _tamper_dense(comm_world, monkeypatch, lambda b, tag: b[:-1] if tag ==
                  param_server.GRAD_TAG else b)
    _one_error_everywhere(config("torch", "ps"), comm_world, "parameter server: bad push: rank ",
                          "gradient values for server")


@pytest.mark.parametrize("tokens", [float("nan"), -3.0, 2.5])
def test_bad_token_count_is_an_error(tokens, comm_world, monkeypatch) -> None:
    _tamper_dense(comm_world, monkeypatch, lambda b, tag: np.array([tokens]) if tag ==
                  param_server.TOKENS_TAG else b)
    _one_error_everywhere(config("torch", "ps"), comm_world, "parameter server: bad push: ",
                          "not a whole number >= 0")


def test_sparse_bad_token_count_is_an_error(comm_world, monkeypatch) -> None:
    _tamper_sparse_push(comm_world, monkeypatch, lambda b, tag: np.array([np.nan]) if tag ==
                        sparse_exchange.TOK_TAG else b)
    _one_error_everywhere(sparse_config("torch", "ps", "sgd", "strategy.ps.sparse_embeddings=on"),
                          comm_world, "not a whole number >= 0")


def _tamper_sparse_push(world: Any, monkeypatch: pytest.MonkeyPatch, change: Any) -> None:
    if world.rank != world.size - 1:
        return
    real = sparse_exchange.SparseExchange.push

    def push(self: Any, touched: Any, tokens: Any) -> Any:
        comm, self.ps.comm = self.ps.comm, Tamper(self.ps.comm, change)
        try:
            return real(self, touched, tokens)
        finally:
            self.ps.comm = comm

    monkeypatch.setattr(sparse_exchange.SparseExchange, "push", push)


def test_sparse_header_of_wrong_length_does_not_block_the_server(comm_world, monkeypatch) -> None:
    """An empty header and no embedding segments after it: a server that took the header's
    word would probe for segments that never come."""
    def change(b: Any, tag: int) -> Any:
        if tag == sparse_exchange.HDR_TAG:
            return np.empty(0, dtype=np.int64)
        return None if tag in (sparse_exchange.IDS_TAG, sparse_exchange.ROWS_TAG) else b

    _tamper_sparse_push(comm_world, monkeypatch, change)
    _one_error_everywhere(sparse_config("torch", "ps", "sgd", "strategy.ps.sparse_embeddings=on"),
                          comm_world, "pushed a header for")


def test_worker_checks_the_servers_row_ids(comm_world, monkeypatch) -> None:
    """Server 0 (rank 0) replies with negative row ids, which numpy would wrap to the last rows."""
    if comm_world.rank == 0:
        real = sparse_exchange.SparseExchange.send_params

        def send_params(self: Any, unions: Any) -> Any:
            comm, self.ps.comm = self.ps.comm, Tamper(
                self.ps.comm, lambda b, tag: -b - 1 if tag == sparse_exchange.PIDS_TAG else b)
            try:
                return real(self, unions)
            finally:
                self.ps.comm = comm

        monkeypatch.setattr(sparse_exchange.SparseExchange, "send_params", send_params)
    _one_error_everywhere(sparse_config("torch", "ps", "sgd", "strategy.ps.sparse_embeddings=on"),
                          comm_world, "outside its rows")


def test_worker_checks_row_ids_at_the_tables_end(comm_world, monkeypatch) -> None:
    """Server 0 replies with every row id equal to its segment's row count (one past the last
    row, issue 39): refused as outside the rows, never written (nor an IndexError)."""
    if comm_world.rank == 0:
        real = sparse_exchange.SparseExchange.send_params

        def send_params(self: Any, unions: Any) -> Any:
            emb = [g for g in self.segs[self.ps.rank] if g.sparse_capable]
            end = {id(u): g.rows for u, g in zip(unions, emb, strict=True) if u is not None}

            def change(b: Any, tag: int) -> Any:
                if tag == sparse_exchange.PIDS_TAG and id(b) in end:
                    return np.full_like(b, end[id(b)])
                return b

            comm, self.ps.comm = self.ps.comm, Tamper(self.ps.comm, change)
            try:
                return real(self, unions)
            finally:
                self.ps.comm = comm

        monkeypatch.setattr(sparse_exchange.SparseExchange, "send_params", send_params)
    _one_error_everywhere(sparse_config("torch", "ps", "sgd", "strategy.ps.sparse_embeddings=on"),
                          comm_world, "outside its rows")
