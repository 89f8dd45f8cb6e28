"""A rate-limited link between the two namespace hosts of tools/testbed/netns.py: a token
bucket (tc's ``tbf``) on the egress of both veth ends, so each direction carries at most the
set rate. This kernel has no ``netem``: rate can be shaped, delay cannot be added.

Burst: tbf lets a packet go only when its bucket holds enough tokens, and holds at most
``burst`` bytes of them. Tokens that arrive while the bucket is full are lost, so the burst
must hold what arrives between two dequeues: at least one timer tick's worth, rate / HZ bytes
(tc-tbf(8)); a smaller one caps the rate below the set one. It must also hold the largest
packet: veth hands tbf GSO packets of up to 64 KiB. A larger burst costs accuracy the other
way: an idle link's full bucket lets its first ``burst`` bytes through at once, so a message
of S bytes takes (S - burst) / rate. ``tbf_burst`` takes rate / HZ (4 ms of the rate at this
kernel's HZ = 250), at least 128 KiB: the bias is then 4 ms per message, which the link check
keeps small with messages of 0.25 s or more (and removes with a two-size slope).
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Sequence
from pathlib import Path

from tools.testbed.netns import sh

DEV = "hvd0"
"""The veth end's name inside each namespace host (netns.veth_hosts)."""
LATENCY_MS = 20
"""tbf's queue: rate x 20 ms of packets wait at most (TCP fills it; the rate is what counts)."""
MIN_BURST = 128 << 10
FALLBACK_HZ = 100  # the lowest common CONFIG_HZ: the largest burst, when HZ cannot be read


def check_rate(rate_gbit: float) -> float:
    """``rate_gbit`` as a float, refused unless a positive finite number of Gbit/s.

    Raises:
        ValueError: one line naming the bad rate.
    """
    try:
        r = float(rate_gbit)
    except (TypeError, ValueError):
        raise ValueError(f"link rate must be a positive number of Gbit/s (got {rate_gbit!r})"
                         ) from None
    if not math.isfinite(r) or r <= 0:
        raise ValueError(f"link rate must be a positive number of Gbit/s (got {rate_gbit!r})")
    return r


def kernel_hz(config: Path = Path("/proc/config.gz")) -> int:
    """The running kernel's CONFIG_HZ, or FALLBACK_HZ when its config is not readable."""
    try:
        for line in gzip.open(config, "rt"):
            if line.startswith("CONFIG_HZ="):
                return int(line.split("=", 1)[1])
    except (OSError, ValueError):
        pass
    return FALLBACK_HZ


def tbf_burst(rate_gbit: float, hz: int | None = None) -> int:
    """tbf's burst in bytes for ``rate_gbit``: one timer tick of the rate, at least 128 KiB
    (two GSO packets of 64 KiB)."""
    bytes_per_s = check_rate(rate_gbit) * 1e9 / 8
    return max(MIN_BURST, math.ceil(bytes_per_s / (hz or kernel_hz())))


def qdisc(ns: str, dev: str = DEV) -> dict:
    """The root qdisc of ``dev`` in namespace ``ns`` as ``tc -s -j`` reads it back: kind,
    options (tbf: rate in bytes/s, burst in bytes) and the bytes sent through it."""
    out = sh("ip", "netns", "exec", ns, "tc", "-s", "-j", "qdisc", "show", "dev", dev).stdout
    roots = [q for q in json.loads(out or "[]") if q.get("root")]
    return roots[0] if roots else {"kind": "none", "bytes": 0}


def shape(ns: Sequence[str], rate_gbit: float, dev: str = DEV,
          latency_ms: float = LATENCY_MS) -> list[dict]:
    """Limit both ends of the link (``dev`` in each namespace of ``ns``) to ``rate_gbit``
    Gbit/s; return each end's qdisc read back.

    Raises:
        ValueError: a rate that is not positive (nothing changed).
        AssertionError: tc failed, or what it reads back is not the rate and burst set.
    """
    rate = check_rate(rate_gbit)
    burst = tbf_burst(rate)
    bits = round(rate * 1e9)
    got = []
    for n in ns:
        # replace: one command whether the end is unshaped or shaped at another rate
        sh("ip", "netns", "exec", n, "tc", "qdisc", "replace", "dev", dev, "root", "tbf",
           "rate", f"{bits}bit", "burst", str(burst), "latency", f"{latency_ms}ms")
        q = qdisc(n, dev)
        opts = q.get("options", {})
        # tc stores the burst in its own time units: it reads back within a fraction of a %
        if (q.get("kind") != "tbf" or abs(opts.get("rate", 0) * 8 - bits) > bits * 1e-3
                or abs(opts.get("burst", 0) - burst) > burst * 0.01):
            raise AssertionError(f"{n}/{dev}: tbf at {rate:g} Gbit/s, burst {burst} not in "
                                 f"force: tc reads back {q}")
        got.append(q)
    return got


def unshape(ns: Sequence[str], dev: str = DEV) -> None:
    """Remove the shaping from both ends (nothing when none); check that none is left.

    Raises:
        AssertionError: a tbf qdisc is still there afterwards.
    """
    for n in ns:
        sh("ip", "netns", "exec", n, "tc", "qdisc", "del", "dev", dev, "root", check=False)
        if (q := qdisc(n, dev)).get("kind") == "tbf":
            raise AssertionError(f"{n}/{dev}: tbf still in force after removing it: {q}")


def sent_bytes(ns: Sequence[str], dev: str = DEV) -> list[int]:
    """Bytes each end's root qdisc has sent: what crossed the link, per direction."""
    return [int(qdisc(n, dev).get("bytes", 0)) for n in ns]
