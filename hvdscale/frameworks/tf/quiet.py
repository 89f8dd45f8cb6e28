"""TensorFlow, imported with its start-up logging held to ``TF_CPP_MIN_LOG_LEVEL``.

Every module of this package takes ``tf`` from here, so whichever is imported first, TensorFlow
starts quietly. TensorFlow 2.21 logs its start-up lines (oneDNN notice) through absl before absl
is initialised, so ``TF_CPP_MIN_LOG_LEVEL`` does not filter them; this applies that level.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

# absl lines below TF_CPP_MIN_LOG_LEVEL: I (0) and W (1) lines, and absl's notice that it logs
# to stderr before its initialisation (a warning). E and F lines and anything else pass.
_ABSL_LINE = re.compile(r"^([IW])\d{4} \d\d:\d\d:\d\d")
_ABSL_NOTICE = "WARNING: All log messages before absl::InitializeLog() is called"


@contextmanager
def _filtered_stderr(min_level: int) -> Iterator[None]:
    """Hold back fd 2's absl INFO/WARNING lines below ``min_level`` while the block runs.

    TensorFlow 2.21 logs its start-up lines (oneDNN notice) through absl before absl is
    initialised, so ``TF_CPP_MIN_LOG_LEVEL`` does not filter them; this applies that level to
    them. Everything else written meanwhile (errors, tracebacks) is written back unchanged.
    """
    if min_level <= 0:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            for line in held.read().decode(errors="replace").splitlines(keepends=True):
                m = _ABSL_LINE.match(line)
                level = {"I": 0, "W": 1}[m.group(1)] if m else (1 if _ABSL_NOTICE in line
                                                                else 9)
                if level >= min_level:
                    sys.stderr.write(line)
            sys.stderr.flush()


# TensorFlow's C++ start-up logging stays off the console unless asked for (a value the user
# set wins); errors still show.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
_LEVEL = int(os.environ["TF_CPP_MIN_LOG_LEVEL"]) if \
    os.environ["TF_CPP_MIN_LOG_LEVEL"].isdigit() else 2
with _filtered_stderr(_LEVEL):
    import tensorflow as tf

__all__ = ["tf"]
