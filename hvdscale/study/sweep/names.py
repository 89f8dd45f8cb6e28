"""Comma-separated option values (``--strategies horovod,ps``, ``--frameworks torch,tf``, ...):
one parser for every study tool's name lists, so every such option accepts and refuses the same
way."""

from __future__ import annotations

from collections.abc import Sequence

from hvdscale.errors import HvdscaleError


def parse_names(text: str, known: Sequence[str], option: str, what: str) -> list[str]:
    """Comma-separated names from ``known``, in the given order, without repeats.

    Args:
        text: the option's value, e.g. ``"horovod,ps"``.
        known: the names allowed.
        option: the option as the user typed it (``--strategies``), named in the error.
        what: what one name is (``strategy``), named in the error.

    Raises:
        HvdscaleError: a name not in ``known`` (an empty list names the empty string).
    """
    out: list[str] = []
    for t in (s.strip() for s in str(text).split(",")):
        if t not in known:
            raise HvdscaleError(f"{option}: unknown {what} {t!r}; choose from "
                                f"{', '.join(known)}")
        if t not in out:
            out.append(t)
    return out
