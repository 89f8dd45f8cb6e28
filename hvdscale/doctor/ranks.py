"""What differs between the ranks and hosts of one launch: versions, interpreter, GPUs,
interfaces, cores. One line per fact that is not the same everywhere."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hvdscale.doctor.host import gpu_table
from hvdscale.doctor.lines import FAIL, WARN, Line

SAME_EVERYWHERE = "install the same versions on every host (one image or venv)"


def _per_rank(f: dict[str, Any]) -> dict[str, str]:
    """The facts every rank must share (a mismatch breaks collectives or the results)."""
    out = {"python": f"{f['python']} ({f['executable']})"}
    out.update({k: str(v) for k, v in f["versions"].items() if k != "python"})
    return out


def _per_host(f: dict[str, Any]) -> dict[str, str]:
    """Host facts that may differ and should be known (GPUs, driver, interfaces, cores)."""
    host = f.get("hostfacts") or {}
    gpus = gpu_table(f)
    names = sorted({a[0] for a in f["net"]["addresses"]})
    return {"gpus": ", ".join(sorted(g["name"] for g in gpus)) or "none",
            "gpu driver": str(host.get("driver")),
            "interfaces": ", ".join(names) or "loopback only",
            "cores": str(f["cores"])}


def ranges(ranks: list[int]) -> str:
    """``0-3,5`` for a sorted list of ranks."""
    out: list[str] = []
    start = prev = ranks[0]
    for r in [*ranks[1:], None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ",".join(out)


def _compare(facts: list[dict[str, Any]], pick: Callable[[dict[str, Any]], dict[str, str]],
             only_hosts: bool) -> dict[str, dict[str, list[int]]]:
    """key -> value -> ranks holding it (host facts: only the ranks that read them)."""
    seen: dict[str, dict[str, list[int]]] = {}
    for rank, f in enumerate(facts):
        if only_hosts and f.get("hostfacts") is None:
            continue
        for key, value in pick(f).items():
            seen.setdefault(key, {}).setdefault(value, []).append(rank)
    return seen


def _line(key: str, groups: dict[str, list[int]], facts: list[dict[str, Any]],
          status: str, fix: str) -> Line:
    parts = []
    for value, ranks in groups.items():
        hosts = ", ".join(dict.fromkeys(facts[r]["host"] for r in ranks))
        parts.append(f"{value} on rank {ranges(ranks)} ({hosts})")
    return Line(f"differs: {key}", status, "; ".join(parts), fix)


def differences(facts: list[dict[str, Any]]) -> list[Line]:
    """One line per fact that differs between ranks (fail: versions, interpreter) or between
    hosts (warn: GPUs, driver, interfaces, cores)."""
    lines = []
    for key, groups in _compare(facts, _per_rank, only_hosts=False).items():
        if len(groups) > 1:
            lines.append(_line(key, groups, facts, FAIL, SAME_EVERYWHERE))
    for key, groups in _compare(facts, _per_host, only_hosts=True).items():
        if len(groups) > 1:
            fix = ("the same interface name on every host, or --network-interfaces"
                   if key == "interfaces" else "expect the slowest host to set the pace")
            lines.append(_line(key, groups, facts, WARN, fix))
    return lines
