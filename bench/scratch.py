"""Scratch directories of the benches: never a fixed name in the shared temporary directory.

A fixed name under /tmp can be made first by another local user (with symlinks inside, which
``write_text`` would follow, or an ``authorized_keys`` the bench hands to sshd). So a bench
without ``--work``/``--out`` gets a fresh ``tempfile.mkdtemp()`` (mode 0700, new name), and a
directory the user names, which a rerun may resume, is used only when it is a real directory
(not a symlink) owned by this user and closed to everyone else (mode 0700).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


class UnsafeScratch(SystemExit):
    """A named scratch directory that another user could control (the bench exits with it)."""


def scratch_dir(given: str | None, prefix: str) -> Path:
    """The bench's scratch directory: ``given`` (made 0700 when missing, checked when present)
    or, when None or empty, a fresh private directory in the system's temporary directory.

    Raises:
        UnsafeScratch: ``given`` is a symlink, not a directory, not owned by this user, or open
            to the group or others.
    """
    if not given:
        return Path(tempfile.mkdtemp(prefix=prefix))
    path = Path(given)
    try:
        path.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        pass
    st = os.lstat(path)  # lstat: a planted symlink is judged itself, never followed
    problem = ("is a symlink" if stat.S_ISLNK(st.st_mode) else
               "is not a directory" if not stat.S_ISDIR(st.st_mode) else
               f"is owned by uid {st.st_uid}, not this user ({os.geteuid()})"
               if st.st_uid != os.geteuid() else
               f"has mode {stat.S_IMODE(st.st_mode):04o}: others could plant files in it"
               if st.st_mode & 0o077 else "")
    if problem:
        raise UnsafeScratch(f"scratch directory {path} {problem}; name a directory of your own "
                            "with mode 0700, or leave the option out for a fresh private one")
    return path
