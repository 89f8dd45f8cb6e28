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
import time
from collections.abc import Callable, Mapping
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


def _family(proc: subprocess.Popen, known: set[int]) -> set[int]:
    """The launch's running processes: its session's, the launcher's descendants (which a
    launcher may put in sessions of their own) and those of ``known`` still running; ``known``
    grows by what is found, so a descendant is not lost when the launcher that led to it is."""
    import psutil

    pids = session_members(proc.pid)
    if proc.poll() is None:  # (once reaped, its pid may be another process's)
        try:
            pids |= {c.pid for c in psutil.Process(proc.pid).children(recursive=True)}
        except psutil.NoSuchProcess:
            pass
    known |= pids
    known.discard(os.getpid())
    return {p for p in known if _alive(p)}


def _signal_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def kill_tree(proc: subprocess.Popen, grace_s: float = GRACE_S,
              known: set[int] | None = None) -> int:
    """End ``proc`` (a launch started by ``start``) and every process of its tree: TERM, then
    KILL after ``grace_s``; returns how many processes were running when it began."""
    known = set() if known is None else known
    first = _family(proc, known)
    _signal_all(first, signal.SIGTERM)
    end = time.monotonic() + grace_s
    while time.monotonic() < end:
        proc.poll()  # reap the launcher (a zombie still counts in its session)
        if not _family(proc, known) and proc.poll() is not None:
            return len(first)
        time.sleep(0.05)
    # Rescanned, not the first list: a launcher in its start-up may have spawned ranks since.
    for _ in range(100):
        left = _family(proc, known)
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
        proc, known = None, set()
        try:
            proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL,
                                    env=dict(env), cwd=cwd, start_new_session=True)
            timed_out = _wait(proc, spawned, limit_s, watch, known)
        except BaseException:
            if proc is not None:
                kill_tree(proc, known=known)
            raise
        left = kill_tree(proc, known=known) if timed_out else _left_behind(proc, known)
    rc = proc.returncode
    why = (f"timed out after {limit_s:g} s; ended the launch and its ranks" if timed_out
           else f"exit {rc}" if rc else "")
    if left and not timed_out:
        why = (why + "; " if why else "") + f"ended {left} process(es) it left running"
    return Ended(rc, why, spawned, time.time(), timed_out, 0 if timed_out else left)


def _wait(proc: subprocess.Popen, spawned: float, limit_s: float,
          watch: Callable[[], float | None] | None, known: set[int]) -> bool:
    """Wait for the launcher, noting its tree in ``known``; True when the limit ended it."""
    while True:
        try:
            proc.wait(timeout=POLL_S)
            return False
        except subprocess.TimeoutExpired:
            _family(proc, known)
        since = (watch() if watch is not None else None) or spawned
        if time.time() - since > limit_s:
            return True


def _left_behind(proc: subprocess.Popen, known: set[int]) -> int:
    """After the launcher exited by itself: end what of its tree still runs (a rank whose peer
    was lost, a helper); returns how many there were."""
    end = time.monotonic() + 1.0  # ranks that are already ending get their moment
    while _family(proc, known):
        if time.monotonic() > end:
            return kill_tree(proc, known=known)
        time.sleep(0.05)
    return 0
