"""Start-up clock of one rank: seconds from the OS's start of this process to its first step,
split into phases a user can act on.

The clock starts when the kernel started the process (``/proc/self/stat``), not when Python
ran the first line of hvdscale, so the interpreter's own start-up and every import count. The
runner marks the end of each phase (``mark``); a phase's time is the time since the previous
mark. Wall-clock (epoch) seconds, so the sweep can line a rank's start up with its launch.
"""

from __future__ import annotations

import os
import time
from typing import Any

PHASES = ("imports", "mpi", "horovod", "side_channel", "process_group", "data", "model",
          "first_step")
"""The phases in the order they run (``hvdscale.records.startup`` names them for people):
interpreter and imports (the framework's too), MPI's initialisation (mpi4py; nothing under
gloo), Horovod's init and the first barrier, the side channel and rendezvous, the native
strategy's process group (DDP, MWMS; the strategy's construction otherwise), data, the model
and its initial parameters shared, the first step (warm-up or measured)."""


def process_start() -> float:
    """Epoch seconds at which the OS started this process (to 10 ms on Linux)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            # Field 22 (after the parenthesised name, which may hold spaces): clock ticks
            # since boot, on the clock CLOCK_BOOTTIME reads.
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
        return time.time() - age
    except (OSError, ValueError, IndexError, AttributeError):
        import psutil  # not Linux: psutil knows the start to its own resolution

        return psutil.Process().create_time()


class StartupClock:
    """The marks of one run on this rank."""

    def __init__(self) -> None:
        self.start = process_start()
        self.marks: list[tuple[str, float]] = []

    def mark(self, name: str) -> None:
        """Phase ``name`` ends now (a later mark of the same name adds to it)."""
        self.marks.append((name, time.time()))

    def once(self, name: str) -> None:
        """``mark(name)`` unless ``name`` was marked already (the first step's end)."""
        if all(n != name for n, _ in self.marks):
            self.mark(name)

    def phases(self) -> dict[str, float]:
        """Seconds per phase, in ``PHASES`` order; a phase never marked is 0."""
        out = dict.fromkeys(PHASES, 0.0)
        prev = self.start
        for name, at in self.marks:
            out[name] = out.get(name, 0.0) + max(0.0, at - prev)
            prev = at
        return {k: round(v, 4) for k, v in out.items()}

    def entry(self) -> dict[str, Any]:
        """This rank's part of the record: its process start (epoch s), the phases and their
        sum (process start to the last mark)."""
        last = self.marks[-1][1] if self.marks else self.start
        return {"process_start": round(self.start, 3), "phases": self.phases(),
                "total_s": round(last - self.start, 4)}


_clock = StartupClock()


def begin() -> StartupClock:
    """The clock of the run starting now (a second run in one process starts from its own
    beginning: a process start long past would charge the first run's time to its imports)."""
    global _clock
    if _clock.marks:
        _clock = StartupClock()
        _clock.start = time.time()
    return _clock


def mark(name: str) -> None:
    """Phase ``name`` of this rank's current run ends now."""
    _clock.mark(name)


def clock() -> StartupClock:
    """The current run's clock."""
    return _clock


def init_mpi() -> None:
    """Initialise MPI now (mpi4py's import does), in an MPI launch only (not horovodrun
    --gloo's or torchrun's, which have no MPI job): its own phase, instead of hidden in
    Horovod's init or the world's construction."""
    from hvdscale.core.world import launch_kind

    if launch_kind() != "mpi":
        return
    try:
        from mpi4py import MPI  # noqa: F401  (hvd: the import runs MPI_Init_thread)
    except ImportError as e:  # a machine with PyTorch only: say what runs there
        from hvdscale.errors import HvdscaleError

        raise HvdscaleError(f"this launch needs MPI and mpi4py does not import ({e}); "
                            "pip install mpi4py, or start the ranks with torchrun "
                            "(torchrun --nproc-per-node N -m hvdscale run ...: ddp and "
                            "independent run there without MPI)") from None


def exit_now(code: int) -> None:
    """End this process with ``code`` without the interpreter's teardown (seconds of freeing
    torch's modules one by one, paid by every rank of every launch after its record is
    written): the atexit handlers (Horovod's shutdown) run, MPI is finalised if mpi4py started
    it, the streams are flushed, then the process ends at once."""
    import atexit
    import sys

    atexit._run_exitfuncs()
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        mpi.Finalize()  # hvd: the launcher expects every rank to finalise
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(code)
