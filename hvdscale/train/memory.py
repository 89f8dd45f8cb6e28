"""This process's resident memory in MiB: its peak so far and its size now (for the record)."""

from __future__ import annotations

import os
import resource


def peak_rss_mb() -> float:
    """The peak resident set size of this process so far (Linux reports it in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def current_rss_mb() -> float:
    """The resident set size now (NaN where /proc is not there to read)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return float("nan")
