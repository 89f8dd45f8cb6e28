"""Supervision: end the whole job promptly when any rank fails, hangs, overruns a step or
overruns the whole run's deadline.

Nothing here uses a collective: the other ranks may be stuck inside one.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from hvdscale.core.peers import waiting_for
from hvdscale.errors import HvdscaleError

# Ranks other than the lowest wait this long before reporting an input error, so that an error
# every rank hits identically (a bad config) is printed once, by rank 0, whose abort ends them.
_ECHO_DELAY_S = 3.0


def _launcher_ends_job_on_exit() -> bool:
    """True when this rank was started by Open MPI's ``mpirun`` (also under ``horovodrun
    --mpi``) and that ends the whole job when a rank exits non-zero (its default)."""
    return ("OMPI_MCA_orte_hnp_uri" in os.environ  # hvd: set only for ranks mpirun started
            and os.environ.get("OMPI_MCA_orte_abort_on_non_zero_status", "1") != "0")


def abort_job(code: int) -> None:
    """End every rank now, using no collective (the others may be inside one).

    Under ``mpirun`` the non-zero exit ends the job (mpirun kills the other ranks and prints
    its usual summary): MPI_Abort there races its own banner to mpirun, which then prints an
    internal ``ORTE_ERROR_LOG: Data unpack would read past end of buffer`` line instead. Under
    other MPI launches (``srun --mpi=pmix``, which may not kill a job on a bad exit) MPI_Abort
    ends the job; without MPI (``--gloo``, before MPI_Init) the non-zero exit does, as
    horovodrun ends a job when a rank fails.
    """
    mpi = sys.modules.get("mpi4py.MPI")
    if (mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized()
            # A one-rank job has no one else to end: exit plainly, without Open MPI's
            # MPI_ABORT banner under the error just printed.
            and mpi.COMM_WORLD.Get_size() > 1 and not _launcher_ends_job_on_exit()):
        mpi.COMM_WORLD.Abort(code)  # hvd:
    os._exit(code)


def report_and_abort(exc: BaseException, rank: int) -> None:
    """Print ``exc`` once, naming the rank, and end the whole job with a non-zero exit."""
    code = 2 if isinstance(exc, HvdscaleError) else 1
    if isinstance(exc, HvdscaleError):
        if rank != 0:
            time.sleep(_ECHO_DELAY_S)
        msg = f"hvdscale: error (rank {rank}): {exc}\n"
    else:
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        msg = f"hvdscale: rank {rank} failed:\n{tb}"
    sys.stderr.write(msg)
    sys.stderr.flush()
    sys.stdout.flush()
    abort_job(code)


def _guarded(watch: Callable[[], None], rank: int, what: str) -> Callable[[], None]:
    """``watch`` (a supervising thread's body) such that if it fails, the job still ends: a
    rank that can no longer police itself must not leave the job to hang unwatched."""
    def run() -> None:
        try:
            watch()
        except Exception as exc:  # whatever failed, the job must still end
            sys.stderr.write(f"hvdscale: error (rank {rank}): the {what} failed "
                             f"({type(exc).__name__}: {exc}); ending the job.\n")
            sys.stderr.flush()
            abort_job(3)
    return run


class StepWatchdog:
    """Ends the job when one step runs longer than ``timeout_s`` (a stuck or very slow rank).

    ``phase()`` says what this rank is doing: ``compute`` (its own forward/backward) or
    ``communicate`` (waiting on the other ranks). The rank whose step overruns in ``compute`` is
    the slow one and says so; ranks overrunning while waiting report after a grace period, so
    the slow rank's message is the one shown when its watchdog can still run. ``overlapped``
    (compute and collectives in one call) reports as a waiting rank does, naming no culprit of
    its own (the peers' answers may name one, or say that none can be told); ``joined`` (a
    rank out of batches inside DDP's join context) is not policed.
    """

    GRACE_S = 5.0

    def __init__(self, timeout_s: float, rank: int,
                 phase: Callable[[], str] = lambda: "compute") -> None:
        self.timeout_s = timeout_s
        self.rank = rank
        self.phase = phase
        self._deadline: float | None = None
        self._step = -1
        self._started = time.monotonic()
        # The phase last seen and since when: checked at every poll of the watch thread (and
        # every answer), so the time in the current phase is known to within about a second.
        self._kind, self._kind_since = "compute", self._started
        self._lock = threading.Lock()
        global _watchdog
        _watchdog = self  # what this rank answers the others (current_state)
        if timeout_s > 0:
            threading.Thread(target=_guarded(self._watch, rank, "step watchdog"),
                             name="hvdscale-watchdog", daemon=True).start()

    def start_step(self, step: int) -> None:
        kind = self.phase()
        with self._lock:
            self._step = step
            self._started = time.monotonic()
            self._deadline = self._started + self.timeout_s
            self._kind, self._kind_since = kind, self._started

    def _observe(self) -> tuple[str, float]:
        """This rank's phase now, and since when (the first time it was seen)."""
        kind = self.phase()
        with self._lock:
            if kind != self._kind:
                self._kind, self._kind_since = kind, time.monotonic()
            return self._kind, self._kind_since

    def state(self) -> dict[str, Any] | None:
        """This rank's step, its phase ``kind`` there, whether it waits (any kind but
        ``compute``), ``for_s`` in that phase and ``step_for_s`` in the step; None between
        steps."""
        kind, since = self._observe()
        with self._lock:
            if self._deadline is None:
                return None
            step, started = self._step, self._started
        now = time.monotonic()
        return {"phase": f"step {step}", "step": step, "kind": kind, "for_s": now - since,
                "step_for_s": now - started, "waiting": kind != "compute"}

    def end_step(self) -> None:
        with self._lock:
            self._deadline = None

    def stop(self) -> None:
        global _watchdog
        with self._lock:
            self._deadline = None
            self.timeout_s = 0.0
        if _watchdog is self:
            _watchdog = None

    def _late(self) -> tuple[bool, int]:
        with self._lock:
            late = self._deadline is not None and time.monotonic() > self._deadline
            return late, self._step

    def _watch(self) -> None:
        while self.timeout_s > 0:
            time.sleep(min(1.0, self.timeout_s / 4))
            if self._observe()[0] == "joined":
                # DDP's join context keeps a rank out of batches in one step, by design, until
                # the others finish (their watchdogs police their steps): while joined, the
                # step's clock restarts, so the rest of the step still has a whole limit.
                with self._lock:
                    if self._deadline is not None:
                        self._deadline = time.monotonic() + self.timeout_s
                continue
            late, step = self._late()
            if not late:
                continue
            t, phase = self.timeout_s, self.phase()
            if phase == "compute":
                msg = (f"hvdscale: error (rank {self.rank}): rank {self.rank} is the slow rank: "
                       f"step {step} has been computing on it for more than "
                       f"measure.step_timeout_s={t:g}s; ending the job.\n")
            else:
                time.sleep(self.GRACE_S)  # let the slow rank name itself first
                if not self._late()[0]:
                    continue
                # overlapped: its own compute and the collectives in one call (DDP's backward,
                # MWMS's graph): slow itself or waiting, it cannot tell; the peers may.
                did = ("been computing and communicating (in one call) for more than"
                       if phase == "overlapped" else "waited more than")
                msg = (f"hvdscale: error (rank {self.rank}): step {step}: rank {self.rank} has "
                       f"{did} measure.step_timeout_s={t:g}s for the other ranks; "
                       f"{_waiting_for(f'step {step}')}; ending the job.\n")
            sys.stderr.write(msg)
            sys.stderr.flush()
            abort_job(3)


class RunDeadline:
    """Ends the job when the whole run (start-up, data, set-up, training, the closing barriers
    and gather) outlasts ``timeout_s``: hangs outside the step loop have a limit too.

    The runner marks each phase with :meth:`enter`; ``waiting`` phases are the collectives in
    which a rank waits for the others. At the deadline a rank in a phase of its own work is the
    one the others wait for, and names itself and the phase at once; a waiting rank reports
    after a grace period, so the stuck rank's message comes first whenever its own deadline
    thread can run.
    """

    GRACE_S = 5.0

    def __init__(self, timeout_s: float, rank: int) -> None:
        self.timeout_s = timeout_s
        self.rank = rank
        self._t0 = time.monotonic()
        self._phase, self._waiting, self._since = "start-up", False, self._t0
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        if timeout_s > 0:
            threading.Thread(target=_guarded(self._watch, rank, "run deadline"),
                             name="hvdscale-deadline", daemon=True).start()

    def enter(self, phase: str, waiting: bool = False) -> None:
        """Mark the start of ``phase`` on this rank."""
        with self._lock:
            self._phase, self._waiting, self._since = phase, waiting, time.monotonic()

    def stop(self) -> None:
        """The run is over on this rank: no deadline any more."""
        self._stopped.set()

    def _watch(self) -> None:
        if self._stopped.wait(self.timeout_s):
            return
        with self._lock:
            phase, waiting, since = self._phase, self._waiting, self._since
        t, rank = self.timeout_s, self.rank
        in_phase = time.monotonic() - since
        if waiting:
            if self._stopped.wait(self.GRACE_S):
                return
            with self._lock:
                if self._phase != phase:  # the others arrived meanwhile; a new phase started
                    return
            msg = (f"hvdscale: error (rank {rank}): the run passed measure.run_timeout_s={t:g}s "
                   f"while rank {rank} waited {in_phase:.0f}s in phase '{phase}' for the other "
                   f"ranks; {_waiting_for(current_state()['phase'])}; ending the job.\n")
        else:
            msg = (f"hvdscale: error (rank {rank}): rank {rank} did not arrive: it has been in "
                   f"phase '{phase}' for {in_phase:.0f}s when the run passed "
                   f"measure.run_timeout_s={t:g}s; ending the job.\n")
        sys.stderr.write(msg)
        sys.stderr.flush()
        abort_job(3)


_deadline: RunDeadline | None = None
_watchdog: StepWatchdog | None = None
_where: tuple[str, bool, float] = ("start-up", False, time.monotonic())


def current_state() -> dict[str, Any]:
    """What this rank is doing now, as it answers the others (hvdscale.core.peers): its
    phase (or step), whether it waits there for the other ranks, for how many seconds."""
    in_step = _watchdog.state() if _watchdog is not None else None
    if in_step is not None:
        return in_step
    name, waiting, since = _where
    return {"phase": f"phase '{name}'", "step": None, "for_s": time.monotonic() - since,
            "kind": "communicate" if waiting else "compute", "waiting": waiting}


def _waiting_for(where: str) -> str:
    """The clause of a waiting rank's message that says whom it waits for."""
    try:
        named = waiting_for(where)
    except Exception:  # the message is printed and the job ended regardless
        named = ""
    return named or (
        "a rank that is not waiting is stuck (it names itself above when it can; Horovod's "
        "stall warning, if shown, lists the missing ranks)")


def start_deadline(timeout_s: float, rank: int) -> RunDeadline:
    """Start this process's whole-run deadline (``timeout_s`` <= 0: none)."""
    global _deadline
    _deadline = RunDeadline(timeout_s, rank)
    return _deadline


def phase(name: str, waiting: bool = False) -> None:
    """Mark the run's current phase for the deadline's message and for the other ranks."""
    global _where
    _where = (name, waiting, time.monotonic())
    if _deadline is not None:
        _deadline.enter(name, waiting)


def stop_deadline() -> None:
    """The run is over on this rank."""
    global _deadline
    if _deadline is not None:
        _deadline.stop()
        _deadline = None
