"""Open MPI's ``mpirun --tag-output`` text, by rank: each chunk a rank writes starts with its tag
(``[1,0]<stdout>:``), but the chunks of two ranks can meet inside one line (a rank's tag, then
another's text, then the newline), so a line's first tag does not say whose its text is."""

from __future__ import annotations

import re

TAG = re.compile(r"\[(\d+),(\d+)\]<(stdout|stderr)>:")


def by_rank(text: str) -> list[tuple[int, str, str]]:
    """(rank, stream, text) of every tagged chunk of ``text``, in order."""
    parts = TAG.split(text)
    # split() gives: text before the first tag, then (job, rank, stream, chunk) per tag.
    return [(int(parts[i + 1]), parts[i + 2], parts[i + 3]) for i in range(1, len(parts), 4)]


def rank_text(text: str, rank: int) -> str:
    """Everything ``rank`` wrote, its chunks joined."""
    return "".join(chunk for r, _, chunk in by_rank(text) if r == rank)
