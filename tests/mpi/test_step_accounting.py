"""What a step records besides its update, read exactly (issue 50: mutants of these lines
survived, explained as "timing only" or "a label", and the explanations did not hold).

- The parameter server's exchange and server-update seconds feed the report's columns and
  ``comm_time_median_s``: each is a difference of its clock, checked on a clock the test moves.
- Every MPI request a parameter-server step starts is waited before the step returns (an
  unwaited send is a request leaked each step): checked by keeping every request it starts.
- Horovod's step marks (start, backward start and end, end) are ordered times: the timeline's
  step windows are made from them.
- The token count's request is named ``hvdscale.tokens`` exactly: the timeline finds each step's
  start by that name.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from hvdscale.core.world import is_gloo_launch
from hvdscale.strategies import horovod as horovod_base
from hvdscale.strategies import param_server
from tests.exactness import K_STEPS, distributed, request_names
from tests.exactness import config as _config

needs_mpi = pytest.mark.skipif(is_gloo_launch(),
                               reason="the parameter server needs an MPI launch")


class _Clock:
    """``time`` for param_server: each perf_counter() read is 1 s after the one before."""

    def __init__(self) -> None:
        self.now = 100.0

    def perf_counter(self) -> float:
        self.now += 1.0
        return self.now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def _ps_cfg(sparse: str = "off") -> Any:
    return _config("torch", "ps", "strategy.ps.placement=colocated", "strategy.ps.num_servers=1",
                   f"strategy.ps.sparse_embeddings={sparse}")


@needs_mpi
@pytest.mark.parametrize("sparse", ["off", "on"])  # the dense exchange, and the sparse one
def test_ps_timings_are_differences_of_its_clock(monkeypatch, comm_world, sparse) -> None:
    monkeypatch.setattr(param_server, "time", _Clock())
    _, ps = distributed(_ps_cfg(sparse), comm_world)
    assert (ps.sparse is not None) == (sparse == "on")
    # A step reads the clock at its exchange's start and end; the server (rank 0) reads it
    # twice more around its update, inside the exchange: 1 s of update, 3 s of exchange.
    serves = comm_world.rank == 0
    assert ps.server_compute_times == ([1.0] * K_STEPS if serves else [])
    assert ps.comm_times == [3.0 if serves else 1.0] * K_STEPS
    info = ps.info()
    assert info["comm_time_median_s"] == (3.0 if serves else 1.0)
    assert info["server_update_median_s"] == (1.0 if serves else None)


class _Keeping:
    """A communicator that keeps every request it starts (the rest passes through)."""

    def __init__(self, comm: Any) -> None:
        self._comm = comm
        self.started: list[Any] = []

    def Isend(self, *a: Any, **k: Any) -> Any:
        self.started.append(self._comm.Isend(*a, **k))
        return self.started[-1]

    def Irecv(self, *a: Any, **k: Any) -> Any:
        self.started.append(self._comm.Irecv(*a, **k))
        return self.started[-1]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._comm, name)


@needs_mpi
def test_ps_waits_every_request_a_step_starts(monkeypatch, comm_world) -> None:
    kept: list[_Keeping] = []
    setup = param_server.ParameterServer.setup

    def keeping_setup(self, adapter) -> None:
        setup(self, adapter)
        self.comm = _Keeping(self.comm)
        kept.append(self.comm)

    monkeypatch.setattr(param_server.ParameterServer, "setup", keeping_setup)
    distributed(_ps_cfg(), comm_world)
    (comm,) = kept
    assert len(comm.started) >= 2 * K_STEPS  # a push and a pull a step, at least
    from mpi4py import MPI

    # mpi4py sets a request to MPI_REQUEST_NULL once a wait completes it.
    left = [r for r in comm.started if r != MPI.REQUEST_NULL]
    assert not left, f"{len(left)} of {len(comm.started)} requests never waited"


def test_horovod_step_marks_are_ordered_times(monkeypatch, hvd, comm_world) -> None:
    marks: list[dict[str, float]] = []
    monkeypatch.setattr(horovod_base.TimelineCapture, "mark",
                        lambda self, **times: marks.append(times))
    distributed(_config("torch", "horovod"), comm_world)
    assert len(marks) == K_STEPS
    for m in marks:
        assert all(isinstance(m[k], float) for k in
                   ("start", "backward_start", "backward_end", "end")), m
        assert m["start"] <= m["backward_start"] <= m["backward_end"] <= m["end"], m
        assert m["end"] - m["start"] < 60  # seconds of this epoch, not 0 or a sum


def test_the_token_request_is_named_as_the_timeline_finds_it(monkeypatch, hvd,
                                                             comm_world) -> None:
    names = request_names(monkeypatch, hvd, "allreduce_async")
    distributed(_config("torch", "horovod"), comm_world)
    assert names.count("hvdscale.tokens") == K_STEPS, names
