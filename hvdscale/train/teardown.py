"""The end of one point in a shared launch: release everything the point set up, so that the
next point in the same processes starts as a fresh launch would (``hvdscale run-points``).

What a point holds is listed, in the order it was set up, in ``PointRun.held``
(hvdscale.train.runner): Horovod, its world (an MPI communicator of its own), the side channel
and the strategy (the DDP process group and its store, the parameter server's buffers).
Released in reverse order, then the framework's own per-process state (Keras's session) and
the garbage of the point's model, so a rank's memory does not grow from point to point.
"""

from __future__ import annotations

import gc
import importlib
import os
from typing import Any

from hvdscale.core import peers


def _stop_horovod(module: str, env_before: dict[str, str]) -> None:
    """Shut Horovod down and put the HOROVOD_* settings back as they were before the point
    exported its own: Horovod reads them at init, so the next point's init must find only its
    own (not, say, an earlier point's fusion threshold)."""
    from hvdscale.strategies.horovod import horovod_env_now

    hvd = importlib.import_module(module)  # hvd:
    if hvd.is_initialized():
        hvd.shutdown()  # hvd:
    for key in horovod_env_now():
        if key not in env_before:
            del os.environ[key]
    os.environ.update(env_before)


def close_strategies(held: list[tuple[str, Any]]) -> None:
    """Close the strategies in ``held`` (and only them): what a run of its own must release
    before its locals go, Horovod and the world staying for the caller (a test's harness
    shares them)."""
    for kind, thing in held:
        if kind == "strategy":
            thing.close()


def teardown(held: list[tuple[str, Any]], fw: Any) -> None:
    """Release what one point set up (``held``, in set-up order) and the framework's state.

    Args:
        held: ``(kind, thing)`` pairs: ``("horovod", (module, HOROVOD_* before))``,
            ``("world", World)``, ``("peers", Peers)``, ``("strategy", Strategy)``.
        fw: the launch's framework package; its optional ``release()`` drops per-process state
            a model leaves behind.
    """
    for kind, thing in reversed(held):
        if kind == "strategy":
            thing.close()
        elif kind == "peers":
            peers.stop_peers(thing)
        elif kind == "world":
            thing.close()
        elif kind == "horovod":
            _stop_horovod(*thing)
    held.clear()
    release = getattr(fw, "release", None)
    if release is not None:
        release()
    gc.collect()
