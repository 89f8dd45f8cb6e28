"""Where every launch is started: one function (``start``) for the sweep's shared and per-point
launches, single runs (``one_run``: the benches, ``time_to_target``) and ``hvdscale commbench``.

A launch runs in a session of its own (``start_new_session``), so the launcher and every rank
it starts, however deep, can be found again by their session id, even after the launcher is
gone and they were handed to init. ``start`` holds the launch to its deadline and, on the
deadline, on Ctrl-C (any exception while it waits) or when the launcher exits and leaves ranks
behind (a lost rank's peers), ends every process of that session: TERM, a short grace, KILL.
What happened is one line (``Ended.why``).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

POLL_S = 0.2
GRACE_S = 3.0
"""Seconds between TERM and KILL: a rank told to stop has this long to write what it holds."""


@dataclass
class Ended:
    """How one launch ended."""

    rc: int | None
    """The launcher's exit status (negative: the signal that ended it)."""
    why: str
    """One line: "" when it exited 0 by itself, else what ended it."""
    spawned: float
    """Epoch seconds the launcher was started."""
    exited: float
    """Epoch seconds it was gone, its session emptied."""
    timed_out: bool = False
    """The deadline ended it."""
    left_behind: int = 0
    """Processes of its session still alive after the launcher had gone (then ended here)."""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def session_members(sid: int) -> set[int]:
    """Pids of the running processes whose session is ``sid`` (a launch's: its launcher's pid)."""
    out = set()
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and os.getsid(int(name)) == sid and _alive(int(name)):
                out.add(int(name))
        except (ProcessLookupError, PermissionError):
            continue
    return out


TAG = "HVDSCALE_LAUNCH_TAG"
"""Set in each launch's environment (a value of its own): every process of the launch inherits
it, so one that left both the launch's session and its process tree is still found."""


def _tagged(tag: str) -> set[int]:
    """Pids of the running processes whose environment carries ``TAG=tag``."""
    needle = f"{TAG}={tag}\0".encode()
    out = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    if needle in f.read() and _alive(int(name)):
                        out.add(int(name))
            except OSError:
                continue
    return out


@dataclass
class _Tree:
    """A launch's processes, as far as they have been seen."""

    proc: subprocess.Popen
    tag: str
    known: set[int]

    def running(self, deep: bool = True) -> set[int]:
        """Its running processes: its session's, the launcher's descendants (a launcher may
        put them in sessions of their own), those seen before, and (``deep``) those carrying
        its tag."""
        import psutil

        pids = session_members(self.proc.pid) | (_tagged(self.tag) if deep else set())
        if self.proc.poll() is None:  # (once reaped, its pid may be another process's)
            try:
                kids = psutil.Process(self.proc.pid).children(recursive=True)
                pids |= {c.pid for c in kids}
            except psutil.NoSuchProcess:
                pass
        self.known |= pids
        self.known.discard(os.getpid())
        return {p for p in self.known if _alive(p)}


def _signal_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def kill_tree(tree: _Tree, grace_s: float = GRACE_S) -> int:
    """End a launch and every process of its tree: TERM, then KILL after ``grace_s``; returns
    how many processes were running when it began."""
    proc = tree.proc
    first = tree.running()
    _signal_all(first, signal.SIGTERM)
    end = time.monotonic() + grace_s
    while time.monotonic() < end:
        proc.poll()  # reap the launcher (a zombie still counts in its session)
        if proc.poll() is not None and not tree.running(deep=False):
            if not tree.running():
                return len(first)
        time.sleep(0.05)
    # Rescanned, not the first list: a launcher in its start-up may have spawned ranks since.
    for _ in range(100):
        left = tree.running()
        if not left:
            break
        _signal_all(left, signal.SIGKILL)
        time.sleep(0.05)
        proc.poll()
    try:
        proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        pass
    return len(first)


@contextmanager
def _ctrl_c_after() -> Iterator[None]:
    """Hold a Ctrl-C that comes while the launcher is being started until it is started: one
    raised inside ``Popen`` (after the fork, before it returns) would leave a launcher no one
    holds, to run on with its ranks."""
    if threading.current_thread() is not threading.main_thread():
        yield  # (only the main thread hears SIGINT)
        return
    heard: list[int] = []
    old = signal.signal(signal.SIGINT, lambda signum, frame: heard.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
    if heard:
        if callable(old):
            old(signal.SIGINT, None)
        elif old == signal.SIG_DFL:
            raise KeyboardInterrupt


def start(cmd: list[str], env: Mapping[str, str], logs: tuple[Path, Path], limit_s: float,
          watch: Callable[[], float | None] | None = None,
          cwd: str | Path | None = None) -> Ended:
    """Run one launch to its end; the only place a launch's processes are started.

    Args:
        cmd: the launch line (launcher and program: ``launcher.launch_line``).
        env: the launcher's environment (``launcher.launch_env``).
        logs: (stdout, stderr) files; the command line is written first in stdout's.
        limit_s: seconds the launch may run, counted from its start or from what ``watch``
            last returned.
        watch: called every poll; returns the epoch the limit counts from now (a shared
            launch: its running point's start), or None for the launch's start.
        cwd: the directory the launcher starts in (None: this one).

    Returns:
        How it ended. Any exception while it runs (Ctrl-C) ends the whole tree first and is
        raised again.
    """
    out_log, err_log = logs
    with open(out_log, "wb") as fo, open(err_log, "wb") as fe:
        fo.write(("$ " + shlex.join(cmd) + "\n").encode())
        fo.flush()
        spawned = time.time()
        tag = f"{os.getpid()}-{time.time_ns()}"
        tree = None
        try:
            with _ctrl_c_after():
                proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL,
                                        env={**env, TAG: tag}, cwd=cwd, start_new_session=True)
                tree = _Tree(proc, tag, set())
            timed_out = _wait(proc, spawned, limit_s, watch)
        except BaseException:
            if tree is not None:
                kill_tree(tree)
            raise
        left = kill_tree(tree) if timed_out else _left_behind(tree)
    rc = proc.returncode
    why = (f"timed out after {limit_s:g} s; ended the launch and its ranks" if timed_out
           else f"exit {rc}" if rc else "")
    if left and not timed_out:
        why = (why + "; " if why else "") + f"ended {left} process(es) it left running"
    return Ended(rc, why, spawned, time.time(), timed_out, 0 if timed_out else left)


def _wait(proc: subprocess.Popen, spawned: float, limit_s: float,
          watch: Callable[[], float | None] | None) -> bool:
    """Wait for the launcher; True when the limit ended the wait."""
    while True:
        try:
            proc.wait(timeout=POLL_S)
            return False
        except subprocess.TimeoutExpired:
            pass
        since = (watch() if watch is not None else None) or spawned
        if time.time() - since > limit_s:
            return True


def _left_behind(tree: _Tree) -> int:
    """After the launcher exited by itself: end what of its tree still runs (a rank whose peer
    was lost, a helper); returns how many there were."""
    end = time.monotonic() + 1.0  # ranks that are already ending get their moment
    while tree.running():
        if time.monotonic() > end:
            return kill_tree(tree)
        time.sleep(0.05)
    return 0
