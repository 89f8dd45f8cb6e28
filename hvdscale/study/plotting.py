"""The one way study tools draw: matplotlib on the Agg back end (no display on cluster nodes),
figures written atomically, so a report directory never holds half a PNG."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hvdscale.records import store


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg back end (imported on first use: it costs a second)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file beside it and a rename, with the
    umask's mode (a colleague sharing the report directory can read it), not mkstemp's 0600."""
    store.write_atomic(path, data)


def save(fig: Any, path: Path, dpi: int = 110) -> Path:
    """Save ``fig`` as a PNG at ``path`` atomically and close it; returns ``path``."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    pyplot().close(fig)
    write_atomic(path, buf.getvalue())
    return path


@contextmanager
def figure(path: Path, *args: Any, **kwargs: Any) -> Iterator[tuple[Any, Any]]:
    """``with figure(path, 1, 2, figsize=...) as (fig, axes):`` draw, then the figure is laid out
    (``tight_layout``) and saved atomically at ``path`` on leaving the block."""
    fig, axes = pyplot().subplots(*args, **kwargs)
    try:
        yield fig, axes
        fig.tight_layout()
        save(fig, path)
    finally:
        pyplot().close(fig)
