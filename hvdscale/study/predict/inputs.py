"""predict's inputs: the rank counts asked for, the network (a commbench result, or a latency
and a bandwidth) and the model's gradient bytes per tensor."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from hvdscale.config import RunConfig
from hvdscale.errors import HvdscaleError
from hvdscale.study.commbench.output import load_commbench


def parse_ranks(text: str) -> list[int]:
    """``"1,2,4,...,512"`` (``...`` doubles up to the last) -> sorted rank counts."""
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    out: set[int] = set()
    for i, t in enumerate(items):
        if t == "...":
            if i == 0 or i == len(items) - 1 or not items[i - 1].isdigit() or \
                    not items[i + 1].isdigit():
                raise HvdscaleError(f"--ranks {text!r}: '...' must sit between two numbers")
            r = int(items[i - 1])
            while r < int(items[i + 1]):
                out.add(r)
                r *= 2
            continue
        if not t.isdigit() or int(t) < 1:
            raise HvdscaleError(f"--ranks entries must be positive integers (got {t!r})")
        out.add(int(t))
    if not out:
        raise HvdscaleError("--ranks needs rank counts, e.g. 1,2,4,8,64,512")
    return sorted(out)


_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_RATE = {"bit": 1 / 8, "kbit": 1e3 / 8, "mbit": 1e6 / 8, "gbit": 1e9 / 8, "b": 1.0,
         "kb": 1e3, "mb": 1e6, "gb": 1e9}


def parse_latency(text: str) -> float:
    """``"5us"`` -> 5e-6 s (s, ms, us/µs, ns)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?(?:e-?\d+)?)\s*(s|ms|us|µs|ns)\s*", str(text))
    if not m:
        raise HvdscaleError(f"--latency {text!r}: give a time such as 5us or 0.01ms")
    return float(m.group(1)) * _TIME[m.group(2)]


def parse_bandwidth(text: str) -> float:
    """``"25Gbit"`` / ``"25Gbit/s"`` -> bytes/s (also Mbit, GB/s, MB/s; decimal units)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)(bit|b|B)(?:/s|ps)?\s*", str(text))
    if not m:
        raise HvdscaleError(f"--bandwidth {text!r}: give a rate such as 25Gbit or 3GB/s")
    unit = (m.group(2).lower() + ("bit" if m.group(3) in ("bit", "b") else "b"))
    value = float(m.group(1)) * _RATE[unit]
    if value <= 0:
        raise HvdscaleError(f"--bandwidth {text!r} must be positive")
    return value


@dataclass(frozen=True)
class Network:
    """Per-link parameters for ring allreduce and for the parameter server's messages."""

    ring_alpha: float
    ring_beta: float
    ring_overhead: float
    ps_alpha: float
    ps_beta: float
    mem_bw: float | None
    source: str


def network_from_comm(path: str | Path, transport: str = "") -> Network:
    """Link parameters from a commbench result (see the module docstring).

    Raises:
        HvdscaleError: missing or malformed result, or no allreduce transport in it.
    """
    data = load_commbench(path)
    tr = data["transports"]
    name = transport or next((t for t in ("horovod-mpi", "horovod-gloo", "mpi4py") if t in tr),
                             "")
    if name not in tr or name == "ps":
        raise HvdscaleError(f"{path}: no allreduce transport {'(' + name + ') ' if name else ''}"
                            f"in the commbench result (has {', '.join(tr) or 'none'})")
    n = data["ranks"]
    link = tr[name]["link"]
    alpha, overhead = link["alpha_s"], 0.0
    if name.startswith("horovod") and "mpi4py" in tr:
        # Horovod's latency is mostly its coordination cycle, a fixed cost per operation; only
        # the plain MPI latency grows with the ring's 2(n-1) hops.
        alpha = tr["mpi4py"]["link"]["alpha_s"]
        overhead = max(0.0, link["op_latency_s"] - 2 * (n - 1) * alpha)
    ps = tr.get("ps", {}).get("link") or link
    mem = data.get("memcpy", {}).get("concurrent_GBps")
    return Network(alpha, link["beta_s_per_byte"], overhead, ps["alpha_s"], ps["beta_s_per_byte"],
                   mem * 1e9 if isinstance(mem, int | float) and mem > 0 else None,
                   f"commbench {Path(path)} ({name} at {n} ranks"
                   f"{', ps' if 'ps' in tr else ''})")


def network_from_args(latency: str, bandwidth: str, mem_bandwidth: str | None) -> Network:
    """Link parameters given as a latency and a bandwidth (the same for every strategy)."""
    a, bw = parse_latency(latency), parse_bandwidth(bandwidth)
    mem = parse_bandwidth(mem_bandwidth) if mem_bandwidth else None
    return Network(a, 1.0 / bw, 0.0, a, 1.0 / bw, mem,
                   f"latency {latency}, bandwidth {bandwidth}"
                   + (f", memory {mem_bandwidth}" if mem_bandwidth else ""))


def gradient_bytes(cfg: RunConfig) -> list[int]:
    """Gradient bytes of each parameter tensor, in the model's parameter order (fp32, or 2 bytes
    with Horovod's fp16 compression). From the config's framework's ``tensor_sizes`` hook:
    shapes only (PyTorch builds the model on the meta device, no memory)."""
    from hvdscale.frameworks import load_framework

    m = cfg.model
    sizes = load_framework(cfg.framework).tensor_sizes(m, m.src_vocab,
                                                       m.tgt_vocab or m.src_vocab)
    width = 2 if cfg.strategy.horovod.compression == "fp16" else 4
    # Dense: sparse embedding traffic differs per strategy and rank count (forecast.sparse_setup).
    return [n * width for _, n in sizes]


def reduced_bytes_per_step(cfg: RunConfig) -> float:
    """Bytes one rank's gradients put on the wire per step (the S of the fitted families): the
    sum of ``gradient_bytes``, the embedding tables as one rank sends them under sparse merging
    (measured rows). The one place that counts them for ``predict --fit``."""
    from hvdscale.study.predict.sparse_bytes import adjust_gradient_bytes, tensor_sizes

    return float(sum(adjust_gradient_bytes(cfg, tensor_sizes(cfg), gradient_bytes(cfg))))
