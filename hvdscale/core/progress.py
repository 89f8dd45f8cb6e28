"""Rank 0's progress report during a run: phase, step i of N, words/s so far, time left.

On a terminal it is one live line rewritten in place; into a file or a pipe (a SLURM output
file, ``tee``, CI) it is a plain line every ``every_s`` seconds, so logs stay readable.

Cost on the training loop: ``step()`` stores the step number and one ``time.monotonic()``
reading; a daemon thread wakes on its own interval to format and write the line. Nothing here
uses a collective: the figures are rank 0's own (its words, its step times); the summed,
all-rank figures come at the end, in the record, as before. The thread also keeps reporting
while a phase has no steps to count (start-up, gather) or while one step takes long, which is
how a user tells a slow run from a stuck one.

With a live line, SIGINT and SIGTERM (what mpirun's ranks get on Ctrl-C) first end the line,
say which step was reached, and then take their previous course (KeyboardInterrupt, or death
by the signal). The report is written by the thread as soon as the signal arrives, since the
main thread may sit inside a collective that never returns to Python.
"""

from __future__ import annotations

import os
import select
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from hvdscale.core.progress_status import Snapshot, format_status

LIVE_REFRESH_S = 0.5
"""How often the live line is rewritten (a terminal shows it; costs one short write)."""
_CLEAR = "\r\x1b[K"  # carriage return, erase to the end of the line
_STOP = 0  # byte the main thread sends the thread to end it (signal numbers are >= 1)


@dataclass(frozen=True)
class ProgressSettings:
    """What the command line says about progress (``--progress-every``, ``--quiet``)."""

    every_s: float = 10.0
    """Seconds between plain progress lines when output is not a terminal."""
    quiet: bool = False
    """No progress at all (the final summary line stays)."""


def _tty_device(path: str) -> bool:
    """Whether ``path`` (e.g. another process's /proc/PID/fd/1) is a terminal."""
    try:
        if not stat.S_ISCHR(os.stat(path).st_mode):
            return False
        fd = os.open(path, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        return os.isatty(fd)
    finally:
        os.close(fd)


def is_terminal(stream: TextIO, env: dict[str, str] | os._Environ | None = None) -> bool:
    """Whether what ``stream`` writes ends up on a terminal a person watches.

    Open MPI gives every rank's stdout a pseudo-terminal of its own, whatever mpirun's own
    stdout is, so under mpirun the rank's ``isatty()`` says nothing: the answer is whether
    the launcher's (the parent's) stdout is a terminal. A rank on another host (parent: orted)
    therefore reports in plain lines, as do horovodrun's ranks (mpirun's output is a pipe).
    """
    env = os.environ if env is None else env
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    if not os.isatty(fd) or env.get("TERM") == "dumb":
        return False
    if "OMPI_COMM_WORLD_RANK" in env:
        return _tty_device(f"/proc/{os.getppid()}/fd/1")
    return True


class ProgressReport:
    """The calls a run makes; this base does nothing (ranks other than 0, ``--quiet``)."""

    live = False

    def begin(self, warmup: int, steps: int, epochs: int = 0, meter: Any = None) -> None:
        """See :meth:`Progress.begin`."""

    def step(self, step: int) -> None:
        """See :meth:`Progress.step`."""

    def phase(self, name: str) -> None:
        """See :meth:`Progress.phase`."""

    def close(self) -> None:
        """See :meth:`Progress.close`."""


class Progress(ProgressReport):
    """Rank 0's live line or plain lines; start with :func:`start_progress`.

    Args:
        stream: where the report goes (rank 0's stdout in a run).
        every_s: seconds between plain lines.
        live: one line rewritten in place (default: when ``stream`` reaches a terminal).
        clock: monotonic seconds (a test may pass its own).
    """

    def __init__(self, stream: TextIO, every_s: float = 10.0, live: bool | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.live = is_terminal(stream) if live is None else live
        self.interval = min(LIVE_REFRESH_S, every_s) if self.live else every_s
        self.clock = clock
        self._t0 = clock()
        self._phase = "start-up"
        self._warmup = self._steps = self._epochs = 0
        self._meter: Any = None
        self._last = (-1, self._t0)  # (steps finished, when the last one ended)
        self._first_t = self._t0  # when the first step started
        self._warm_end = self._t0  # when the last warm-up step ended (window start)
        self._prev = (0, self._t0)  # (steps finished, when) at the previous report
        self._step_s: float | None = None
        self._shown = False  # the live line holds text
        self._ended = False
        self._lock = threading.RLock()  # RLock: the signal handler runs on the main thread
        self._rfd, self._wfd = os.pipe()
        os.set_blocking(self._wfd, False)
        self._signals: dict[int, Any] = {}
        self._old_wakeup: int | None = None
        if self.live:
            self._install_signals()
        self._thread = threading.Thread(target=self._loop, name="hvdscale-progress", daemon=True)
        self._thread.start()

    # --- called by the training loop (main thread) ---------------------------------------

    def begin(self, warmup: int, steps: int, epochs: int = 0, meter: Any = None) -> None:
        """Training starts: ``warmup`` + ``steps`` steps (``epochs`` > 0: batches of epochs).

        ``meter`` (a :class:`hvdscale.core.meter.StepMeter`) supplies rank 0's measured words.
        """
        self._warmup, self._steps, self._epochs, self._meter = warmup, steps, epochs, meter
        now = self.clock()
        self._first_t = self._warm_end = now
        self._last = self._prev = (0, now)
        self._phase = "warm-up" if warmup > 0 else "measured"

    def step(self, step: int) -> None:
        """Step ``step`` (negative: warm-up) has ended. Cheap: no I/O, no formatting."""
        t = self.clock()
        self._last = (step + self._warmup + 1, t)
        if step < 0:
            self._warm_end = t
        elif step == 0:
            self._phase = "measured"

    def phase(self, name: str) -> None:
        """A new phase (e.g. ``gather`` after the last step)."""
        self._phase = name

    def close(self) -> None:
        """Stop reporting; the live line is erased so the summary line takes its place."""
        with self._lock:
            if not self._ended and self._shown:
                self._write(_CLEAR)
            self._ended = True
        if self._rfd < 0:
            return  # closed before
        self._wake(_STOP)
        self._thread.join(timeout=2.0)
        self._restore_signals()
        for fd in (self._rfd, self._wfd):
            try:
                os.close(fd)
            except OSError:
                pass
        self._rfd = self._wfd = -1

    # --- the reporting thread ------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Where the run is now (read without stopping the loop)."""
        now = self.clock()
        done, t_last = self._last
        warm = min(done, self._warmup)
        meter = self._meter
        if done > self._prev[0]:
            self._step_s = (t_last - self._prev[1]) / (done - self._prev[0])
            self._prev = (done, t_last)
        return Snapshot(phase=self._phase, elapsed_s=now - self._t0, done=done,
                        warmup=self._warmup, steps=self._steps, epochs=self._epochs,
                        words=int(meter.words) if meter is not None else 0,
                        window_s=t_last - self._warm_end if done > self._warmup else 0.0,
                        warmup_s=self._warm_end - self._first_t if warm else 0.0,
                        step_s=self._step_s,
                        running_s=now - t_last if self._phase in ("warm-up", "measured")
                        else 0.0)

    def report(self) -> None:
        """Write the line now (the thread calls this on its interval)."""
        text = format_status(self.snapshot())
        with self._lock:
            if self._ended:
                return
            if self.live:
                width = self._width()
                self._write(_CLEAR + text[: width - 1])
                self._shown = True
            else:
                self._write(text + "\n")

    def _loop(self) -> None:
        while True:
            try:
                ready, _, _ = select.select([self._rfd], [], [], self.interval)
                data = os.read(self._rfd, 64) if ready else b""
            except (OSError, ValueError):
                return  # closed under us
            if ready:
                if not data or _STOP in data:
                    return
                for sig in (signal.SIGINT, signal.SIGTERM):
                    if sig in data:
                        self._interrupted()
                        if sig == signal.SIGTERM:
                            self._die_if_ignored(sig)
                        return
                continue
            try:
                self.report()
            except (OSError, ValueError):
                return  # the stream is gone (closed pipe): stop reporting, never the run

    def _width(self) -> int:
        try:
            return os.get_terminal_size(self.stream.fileno()).columns or 80
        except (OSError, ValueError, AttributeError):
            return 80

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def _wake(self, byte: int) -> None:
        try:
            os.write(self._wfd, bytes([byte]))
        except OSError:
            pass

    # --- interrupts (live line only) -----------------------------------------------------

    def interrupted_text(self) -> str:
        """``hvdscale: interrupted at measured step 12/20 ...``: which step was reached."""
        return format_status(self.snapshot()).replace("hvdscale: ", "hvdscale: interrupted at ",
                                                       1)

    def _interrupted(self) -> None:
        """End the live line and say where the run was; idempotent, any thread."""
        with self._lock:
            if self._ended:
                return
            self._ended = True
            self._write(_CLEAR + self.interrupted_text() + "\n")

    def _install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            old = signal.getsignal(sig)
            # An ignored signal stays ignored (a job started with `cmd &` from a script, or by
            # a batch system, inherits SIGINT ignored, and Python itself then leaves it so):
            # taking it over would end the live line with "interrupted" and then let the run go
            # on. A handler set from C (None here) could not be put back, so it is left too.
            if old is None or old == signal.SIG_IGN:
                continue
            self._signals[sig] = old
            signal.signal(sig, self._on_signal)
        if not self._signals:
            return  # both ignored: nothing to report, and no wake-up fd to put back
        # The C-level handler writes the signal number here at once, so the thread reports
        # even while the main thread is inside a collective.
        self._old_wakeup = signal.set_wakeup_fd(self._wfd, warn_on_full_buffer=False)

    def _restore_signals(self) -> None:
        if not self._signals or threading.current_thread() is not threading.main_thread():
            return
        signal.set_wakeup_fd(self._old_wakeup if self._old_wakeup is not None else -1)
        for sig, old in self._signals.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
        self._signals = {}

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._interrupted()
        old = self._signals.get(signum, signal.SIG_DFL)
        self._restore_signals()
        if callable(old):
            old(signum, frame)  # default SIGINT handler: KeyboardInterrupt
        elif old == signal.SIG_DFL:
            os.kill(os.getpid(), signum)  # die by the signal, as without the live line

    def _die_if_ignored(self, signum: int) -> None:
        """SIGTERM's default is death: if the main thread cannot run its handler soon (it is
        inside a collective), end the process as the signal would have."""
        time.sleep(2.0)
        # Still installed (the main thread's handler has not run and put them back)?
        if self._signals.get(signum) == signal.SIG_DFL:
            os._exit(128 + signum)


def start_progress(settings: ProgressSettings | None, rank: int,
                   stream: TextIO | None = None) -> ProgressReport:
    """Rank 0's progress report (phase ``start-up`` from now on); a no-op elsewhere."""
    settings = settings or ProgressSettings()
    if rank != 0 or settings.quiet:
        return ProgressReport()
    return Progress(stream or sys.stdout, every_s=settings.every_s)
