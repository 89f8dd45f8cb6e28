"""A rate-limited link between the two namespace hosts of tools/testbed/netns.py: a token
bucket (tc's ``tbf``) on the egress of both veth ends, so each direction carries at most the
set rate. This kernel has no ``netem``: rate can be shaped, delay cannot be added.

Burst: tbf lets a packet go only when its bucket holds enough tokens, and holds at most
``burst`` bytes of them. Tokens that arrive while the bucket is full are lost, so the burst
must hold what arrives between two dequeues: at least one timer tick's worth, rate / HZ bytes
(tc-tbf(8)); a smaller one caps the rate below the set one. It must also hold the largest
packet: veth hands tbf GSO packets of up to 64 KiB. ``tbf_burst`` takes rate / HZ (4 ms of the
rate at this kernel's HZ = 250), at least 128 KiB.

Peak rate: alone, that bucket lets an idle link's first ``burst`` bytes through at once, at
memory speed: a 256-KiB message crossed a "2.5 Gbit/s" link at 28 Gbit/s, and a training step
whose gradients fit in the burst (a step's traffic, then a compute pause that refills it) would
never see the link at all, as no NIC behaves. So a second bucket of one GSO packet
(``PEAK_MTU``) refilled at ``PEAK_FACTOR`` x the rate (tbf's ``peakrate``, which must exceed
the rate) meters every packet: bursts leave at the link's rate too, the same 256-KiB message
at 2.8 Gbit/s (one packet of early start), 16 MiB at 93 % of the rate (the two buckets' timer
cost on 2 cores).
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
PEAK_FACTOR = 1.02
"""tbf's peakrate over its rate (tbf refuses a peak rate that is not above the rate)."""
PEAK_MTU = 66000
"""The peak bucket: one GSO packet of 64 KiB with its headers (a larger packet is dropped)."""
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
           "rate", f"{bits}bit", "burst", str(burst), "latency", f"{latency_ms}ms",
           "peakrate", f"{round(bits * PEAK_FACTOR)}bit", "mtu", str(PEAK_MTU))
        q = qdisc(n, dev)
        opts = q.get("options", {})
        # tc stores the burst in its own time units: it reads back within a fraction of a %
        if (q.get("kind") != "tbf" or abs(opts.get("rate", 0) * 8 - bits) > bits * 1e-3
                or abs(opts.get("burst", 0) - burst) > burst * 0.01
                # tc's JSON omits the peak rate; its bucket, ``minburst``, shows only with one
                or abs(opts.get("minburst", 0) - PEAK_MTU) > PEAK_MTU * 0.01):
            raise AssertionError(f"{n}/{dev}: tbf at {rate:g} Gbit/s, burst {burst}, peak "
                                 f"{PEAK_FACTOR} x rate not in force: tc reads back {q}")
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
