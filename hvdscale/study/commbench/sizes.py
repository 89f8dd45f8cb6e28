"""commbench's message sizes and transport names: parsing the options, printing sizes, and how
many repeats a size gets (binary units: 1 KB = 1024 B)."""

from __future__ import annotations

import re

from hvdscale.errors import HvdscaleError
from hvdscale.study.sweep.names import parse_names

TRANSPORTS = ("horovod-mpi", "horovod-gloo", "mpi4py", "ps", "p2p")
MPI_TRANSPORTS = ("p2p", "mpi4py", "ps", "horovod-mpi")  # in the order one mpirun job runs them
DEFAULT_SIZES = "4B..256MB"
# p2p (a ping-pong between two ranks, no collective) only when asked: it is a link check
DEFAULT_TRANSPORTS = ",".join(TRANSPORTS[:4])
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20,
          "MB": 1 << 20, "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}


def parse_size(text: str) -> int:
    """``"4B"``, ``"64KB"``, ``"256MB"``, ``"1048576"`` -> bytes (binary units).

    Raises:
        HvdscaleError: not a size, not positive, or not a whole number of float32 elements.
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).upper() not in _UNITS:
        raise HvdscaleError(f"--sizes: {text!r} is not a size (e.g. 4B, 64KB, 256MB)")
    n = float(m.group(1)) * _UNITS[m.group(2).upper()]
    if n < 4 or n != int(n) or int(n) % 4:
        raise HvdscaleError(f"--sizes: {text!r} must be a positive multiple of 4 bytes "
                            "(whole float32 elements)")
    return int(n)


def parse_sizes(text: str) -> list[int]:
    """``"4B..256MB"`` (doubling; ``"4B..256MB:x4"`` to multiply by 4) or ``"1MB,16MB"``."""
    text = str(text).strip()
    if ".." in text:
        rng, _, step = text.partition(":")
        lo_s, _, hi_s = rng.partition("..")
        lo, hi = parse_size(lo_s), parse_size(hi_s)
        factor = 2
        if step:
            if not re.fullmatch(r"x?\d+", step) or int(step.lstrip("x")) < 2:
                raise HvdscaleError(f"--sizes: step {step!r} must be xN with N >= 2")
            factor = int(step.lstrip("x"))
        if hi < lo:
            raise HvdscaleError(f"--sizes: {text!r} ends below its start")
        out, s = [], lo
        while s <= hi:
            out.append(s)
            s *= factor
        return out
    items = [t for t in text.split(",") if t.strip()]
    if not items:
        raise HvdscaleError("--sizes needs a range like 4B..256MB or a list like 1MB,16MB")
    return sorted({parse_size(t) for t in items})


def parse_transports(text: str) -> list[str]:
    """``"mpi4py,ps"`` -> known transport names, in the given order."""
    return parse_names(text, TRANSPORTS, "--transports", "transport")


def human(nbytes: float) -> str:
    """Bytes as the shortest binary unit: 4 B, 64 KB, 256 MB."""
    for unit, div in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if nbytes >= div:
            v = nbytes / div
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.3g} {unit}"
    return f"{nbytes:.0f} B"


def repeats_for(size: int, repeats: int, min_repeats: int = 5) -> int:
    """Fewer repeats for big messages (their time is steady and long): <= 4 MB get all."""
    return max(min(repeats, min_repeats), min(repeats, int(repeats * (4 << 20) / size)))
