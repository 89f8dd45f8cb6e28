"""How a point ended on every rank of a shared launch, agreed without trusting anyone to come.

After each point every rank says whether it finished (and, if not, why) on a communicator the
points never use, with a time limit. Everyone answered: the launch goes on (a point that failed
on every rank gets a failed record). Someone did not answer within the limit: that rank is stuck
in a collective of the failed point (or gone), so nothing more can run in these processes and
the caller ends the job; the sweep runs the points not reached in a fresh launch.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

AGREE_ENV = "HVDSCALE_AGREE_TIMEOUT_S"
AGREE_TIMEOUT_S = 30.0
"""Seconds a rank waits for the others' word on a point (``HVDSCALE_AGREE_TIMEOUT_S``)."""
ERROR_CHARS = 2000
"""How much of a rank's error text travels in an agreement (MPI's or the store's)."""


@dataclass(frozen=True)
class Agreement:
    """What every rank said of one point."""

    ok: list[bool] | None
    """Per rank, whether the point finished there; None: not every rank answered in time."""
    errors: list[str]
    """Per rank, why it failed there ("" where it finished; empty when ``ok`` is None)."""

    @property
    def all_ok(self) -> bool:
        """Every rank finished the point."""
        return self.ok is not None and all(self.ok)

    @property
    def all_failed(self) -> bool:
        """The point failed on every rank: the launch can go on."""
        return self.ok is not None and not any(self.ok)


def agree_timeout_s() -> float:
    """The limit in force (``HVDSCALE_AGREE_TIMEOUT_S`` or ``AGREE_TIMEOUT_S``)."""
    try:
        return max(0.1, float(os.environ.get(AGREE_ENV, AGREE_TIMEOUT_S)))
    except ValueError:
        return AGREE_TIMEOUT_S


def agree(comm: object, ok: bool, error: str, timeout_s: float | None = None) -> Agreement:
    """Every rank's ``ok`` and ``error`` on ``comm`` (a communicator only agreements use).

    The flags travel by a non-blocking allgather polled against the limit, so a rank whose
    peers never come returns instead of waiting for ever; the error texts then follow by an
    ordinary allgather, every rank being known to be here.
    """
    from mpi4py import MPI  # hvd: the launch's MPI job

    limit = agree_timeout_s() if timeout_s is None else timeout_s
    assert isinstance(comm, MPI.Comm)
    mine = np.array([1 if ok else 0], dtype=np.int32)
    flags = np.zeros(comm.Get_size(), dtype=np.int32)
    req = comm.Iallgather(mine, flags)  # hvd: collective on the agreement's own communicator
    end = time.monotonic() + limit
    while not req.Test():
        if time.monotonic() > end:
            return Agreement(None, [])  # the job ends: the request is never completed
        time.sleep(0.005)
    errors = comm.allgather(error[:ERROR_CHARS])  # hvd: every rank is here
    return Agreement([bool(f) for f in flags], errors)


def agree_on_store(store: Any, rank: int, size: int, ok: bool, error: str,
                   timeout_s: float | None = None) -> Agreement:
    """Every rank's ``ok`` and ``error`` on a key-value store (torchrun's, under a prefix of
    this point's own): each rank sets its key, then waits for all ``size`` keys within the
    limit. No collective is involved, so a rank stuck in the failed point's collective cannot
    hold the others: they time out and end the job, as over MPI. What another rank wrote is
    checked before it is believed (a malformed entry reads as that rank failing)."""
    import datetime
    import json

    limit = agree_timeout_s() if timeout_s is None else timeout_s
    store.set(str(rank), json.dumps([bool(ok), error[:ERROR_CHARS]]))
    keys = [str(r) for r in range(size)]
    try:
        store.wait(keys, datetime.timedelta(seconds=limit))  # hvd: the launch's store
    except RuntimeError:  # the store's timeout (DistStoreError is one): someone never came
        return Agreement(None, [])
    oks, errors = [], []
    for k in keys:
        try:
            flag, why = json.loads(store.get(k))
            if not isinstance(flag, bool) or not isinstance(why, str):
                raise ValueError(k)
        except (ValueError, TypeError):
            flag, why = False, f"rank {k}: a malformed agreement entry"
        oks.append(flag)
        errors.append(why)
    return Agreement(oks, errors)
