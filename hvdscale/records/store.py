"""Run records as JSON Lines, appended atomically.

An append reads the file, writes old lines plus the new one to a temporary file in the same
directory, fsyncs it and renames it over the original, all under an exclusive lock on a side
file. A crash at any point leaves either the old file or the new one: never a half line, never
lost records, and two sweeps writing into one directory never interleave.

A results directory may be shared by the colleagues of a group (group-writable, often setgid):
the lock file is created group-writable (less the umask, as any file), a colleague who cannot
open it for writing locks it read-only (``flock`` needs no write access), the files written by
rename get the umask's mode (or the replaced file's), never a temporary file's 0600, and the
preflight (``check_writable``) proves the lock can be taken, so a run that could not record
fails before it trains.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hvdscale.errors import HvdscaleError
from hvdscale.records.fields import Record, loads

RESULTS_FILE = "results.jsonl"


def _lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def _open_lock(lock: Path) -> int:
    """An fd of ``lock`` to ``flock``: created 0666 less the umask (a colleague of the group
    can open it for writing too), or opened read-only where it cannot be opened for writing."""
    try:
        return os.open(lock, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o666)
    except PermissionError:
        return os.open(lock, os.O_RDONLY | os.O_NOFOLLOW)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = _open_lock(_lock_path(path))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def record_key(cfg: Any) -> dict[str, Any]:
    """A record's ``key`` from a ``RunConfig``: its experiment and series (see
    hvdscale.records.experiment), written by the runner for a run and by the sweep for a
    failed point."""
    from hvdscale.records.experiment import record_key as key_of

    return key_of(cfg)


def results_path(out_dir: str | Path) -> Path:
    return Path(out_dir) / RESULTS_FILE


def check_writable(out_dir: str | Path, need_bytes: int = 1 << 20) -> Path:
    """Create ``out_dir`` and prove a record can be written there, before any training.

    Raises:
        HvdscaleError: the directory cannot be created or written, or its disk is nearly full.
    """
    d = Path(out_dir)
    if d.exists() and not d.is_dir():
        raise HvdscaleError(f"results directory {d} is an existing file, not a directory; "
                            "give --out a directory (it is created if missing)")
    try:
        d.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=d, prefix=".probe-", delete=True) as f:
            f.write(b"x" * 4096)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        raise HvdscaleError(f"results directory {d} is not writable: {e.strerror or e}") from None
    _check_lock_and_results(results_path(d))
    st = os.statvfs(d)
    free = st.f_bavail * st.f_frsize
    existing = results_path(d).stat().st_size if results_path(d).exists() else 0
    # An append rewrites the file, so the disk must hold a second copy of it.
    if free < existing + need_bytes:
        raise HvdscaleError(f"results directory {d} has only {free} bytes free; a record needs "
                            f"{existing + need_bytes}")
    return d


def _check_lock_and_results(path: Path) -> None:
    """The lock beside ``path`` can be opened and locked, and an existing ``path`` read (an
    append rewrites it), or one clear error now, before the run trains."""
    what = _lock_path(path)
    try:
        fd = _open_lock(what)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            pass  # another writer holds it now: it can be locked, just not this instant
        finally:
            os.close(fd)
        what = path
        if path.exists():
            with open(path, "rb"):
                pass
    except OSError as e:
        raise HvdscaleError(f"{what} cannot be opened: {e.strerror or e}; a record could not "
                            "be written there (in a shared results directory, ask its owner to "
                            "make it readable and writable by the group)") from None


def temp_beside(path: Path, keep_mode: bool = True) -> tuple[int, str]:
    """A new temporary file beside ``path`` with the mode ``path`` has (``keep_mode``:
    colleagues keep their access to a shared results file), or 0666 less the umask as for any
    file a program creates; mkstemp's 0600 would survive the rename."""
    mode = None
    if keep_mode:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            pass
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        if mode is not None:
            os.fchmod(fd, mode)
        return fd, str(tmp)
    raise FileExistsError(f"no free temporary name beside {path}")  # pragma: no cover


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file beside it (``temp_beside``: the
    umask's mode, also over an older file, for generated files such as reports) and a rename."""
    fd, tmp = temp_beside(path, keep_mode=False)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def append_record(out_dir: str | Path, record: Record) -> Path:
    """Append one record to ``out_dir/results.jsonl`` atomically; returns the file's path."""
    path = results_path(out_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record.to_dict(), sort_keys=True, allow_nan=True) + "\n"
    with _locked(path):
        old = path.read_bytes() if path.exists() else b""
        if old and not old.endswith(b"\n"):
            old += b"\n"  # a file edited by hand; never glue two records together
        fd, tmp = temp_beside(path)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(old)
                f.write(line.encode())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return path


def load_records(path: str | Path) -> list[tuple[str, Record]]:
    """All records under ``path`` (a results.jsonl file, or a directory searched recursively),
    typed, each with where it comes from (``FILE:LINE``), for messages that point at the bad one.

    Raises:
        HvdscaleError: a missing path, an unreadable or non-UTF-8 file, a line that is not a
            JSON object, or a record that is not what its kind declares (names the field).
    """
    from hvdscale.records.kinds import typed

    p = Path(path)
    if not p.exists():
        raise HvdscaleError(f"no results at {p}")
    files = sorted(f for f in p.rglob(RESULTS_FILE) if f.is_file()) if p.is_dir() else [p]
    records = []
    for f in files:
        try:
            text = f.read_bytes().decode("utf-8")
        except UnicodeDecodeError as e:
            line = f.read_bytes()[: e.start].count(b"\n") + 1
            raise HvdscaleError(f"{f}:{line} is not UTF-8 text; is it a results.jsonl file?"
                                ) from None
        except OSError as e:
            raise HvdscaleError(f"results file {f} cannot be read: {e.strerror or e}") from None
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = loads(line)
            except ValueError:
                raise HvdscaleError(f"{f}:{n} is not a JSON record") from None
            if not isinstance(rec, dict):
                raise HvdscaleError(f"{f}:{n} is not a JSON record (an object {{...}}), but "
                                    f"{type(rec).__name__} {line.strip()[:40]}")
            records.append((f"{f}:{n}", typed(rec, f"{f}:{n}")))
    return records


def read_records(path: str | Path) -> list[Record]:
    """All records under ``path`` (a results.jsonl file, or a directory searched recursively)."""
    return [rec for _, rec in load_records(path)]


# --- a launch's own files (its plan, its state lines, the sweep's timing lines) -------------

def write_record_file(path: str | Path, record: Record) -> None:
    """``record`` as the whole of the file ``path`` (one line), written atomically: a launch's
    plan, which every rank reads."""
    write_atomic(Path(path), (json.dumps(record.to_dict(), sort_keys=True) + "\n").encode())


def append_line(path: str | Path, record: Record) -> None:
    """Append ``record`` to the lines file ``path`` and flush it: a launch's state lines (read
    while the launch runs) and the sweep's timing lines. One writer a file, so no lock."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record.to_dict(), sort_keys=True) + "\n")
        f.flush()


def read_record_file(path: str | Path, kind: type[Record]) -> Record:
    """The one record of kind ``kind`` that the file ``path`` holds (``write_record_file``).

    Raises:
        HvdscaleError: a missing or unreadable file, not one record, another kind, or a field
            that is missing or wrong (one line naming it).
    """
    recs = load_records(path)
    if len(recs) != 1 or not isinstance(recs[0][1], kind):
        found = ", ".join(r.kind for _, r in recs) or "nothing"
        raise HvdscaleError(f"{path}: should hold one {kind.kind} record, holds {found}")
    return recs[0][1]


def read_complete_lines(path: str | Path, kind: type[Record]) -> list[Record]:
    """The records of kind ``kind`` in the lines file ``path`` while its writer still appends:
    complete lines only, up to the first that is not a ``kind`` record (a line being written,
    or one of another shape, ends the reading; the next read starts again from the top)."""
    from hvdscale.records.kinds import typed

    p = Path(path)
    if not p.exists():
        return []
    out = []
    for line in p.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        try:
            rec = typed(json.loads(line), str(p))
        except (ValueError, TypeError, AttributeError, HvdscaleError):
            break
        if not isinstance(rec, kind):
            break
        out.append(rec)
    return out
