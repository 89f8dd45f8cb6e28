"""What ``hvdscale gemm``'s rows show: batch sizes where a larger batch runs slower, and
variants consistently slower than their pre-transposed twin, as data and as Markdown bullets."""

from __future__ import annotations

import itertools
import statistics
from typing import Any

SLOWER_MARGIN = 0.05  # a drop or a twin's win smaller than this is within the noise here
CONSISTENT_SHARE = 0.75  # "consistently": at this share of a hidden size's batch sizes


def slower_with_larger_batch(rows: list[dict[str, Any]],
                             margin: float = SLOWER_MARGIN) -> list[dict[str, Any]]:
    """Consecutive batch sizes where the larger one runs at lower GFLOP/s by > ``margin``."""
    out = []
    keys = sorted({(r["hidden"], r["variant"]) for r in rows})
    for h, v in keys:
        pts = sorted((r["batch"], r["gflops"]) for r in rows
                     if r["hidden"] == h and r["variant"] == v)
        for (b0, g0), (b1, g1) in itertools.pairwise(pts):
            if g1 < g0 * (1 - margin):
                out.append({"hidden": h, "variant": v, "from_batch": b0, "to_batch": b1,
                            "gflops_from": g0, "gflops_to": g1, "drop": 1 - g1 / g0})
    return out


def pretranspose_wins(rows: list[dict[str, Any]],
                      margin: float = SLOWER_MARGIN) -> list[dict[str, Any]]:
    """Per (hidden, variant): the batch sizes where the pre-transposed twin is faster by more
    than ``margin`` (median) and in most paired repeats; ``consistent`` when that holds at
    ``CONSISTENT_SHARE`` of the hidden size's batch sizes."""
    out = []
    for h, v in sorted({(r["hidden"], r["variant"]) for r in rows}):
        rs = [r for r in rows if r["hidden"] == h and r["variant"] == v]
        wins = [r["batch"] for r in rs
                if r["twin_time_s"] < r["time_s"] * (1 - margin)
                and 2 * r["twin_wins"] > len(r["twin_times_s"])]
        if wins:
            speedup = statistics.median(r["time_s"] / r["twin_time_s"] for r in rs
                                        if r["batch"] in wins)
            out.append({"hidden": h, "variant": v, "batches": wins, "of": len(rs),
                        "median_speedup": speedup,
                        "consistent": len(wins) >= CONSISTENT_SHARE * len(rs)})
    return out


def batch_growth(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (hidden, variant): GFLOP/s at batch 32 over batch 1 (the seed notes: about x14 with
    cuBLAS), and at each multiple of 32 over the mean of its two neighbours (measured ones)."""
    out = []
    for h, v in sorted({(r["hidden"], r["variant"]) for r in rows}):
        g = {r["batch"]: r["gflops"] for r in rows if r["hidden"] == h and r["variant"] == v}
        entry: dict[str, Any] = {"hidden": h, "variant": v,
                                 "x32_over_1": g[32] / g[1] if 1 in g and 32 in g else None}
        entry["multiples_of_32"] = {b: g[b] / ((g[b - 1] + g[b + 1]) / 2)
                                    for b in sorted(g) if b % 32 == 0
                                    and b - 1 in g and b + 1 in g}
        out.append(entry)
    return out


def result_label(res: dict[str, Any], sep: str = " ") -> str:
    """``torch`` for fp32 on the CPU (the labels of earlier records); else ``torch cuda tf32``."""
    device, precision = res.get("device", "cpu"), res.get("precision", "fp32")
    extra = [] if device == "cpu" else [device, precision]
    if device == "cpu" and precision != "fp32":
        extra = [precision]
    return sep.join([res["framework"], *extra])


def _growth_text(fw: str, growth: list[dict[str, Any]]) -> list[str]:
    out = []
    for e in growth:
        parts = []
        if e["x32_over_1"] is not None:
            parts.append(f"batch 32 runs x{e['x32_over_1']:.1f} the GFLOP/s of batch 1")
        m32 = e["multiples_of_32"]
        if m32:
            parts.append("multiples of 32 vs their neighbours: " + ", ".join(
                f"{b} x{r:.2f}" for b, r in m32.items()))
        if parts:
            out.append(f"- {fw} hidden {e['hidden']} {e['variant']}: " + "; ".join(parts))
    return out


def findings_text(res: dict[str, Any]) -> list[str]:
    """The batch sizes where a larger batch is slower, where pre-transposing helps, and how
    GFLOP/s grows with the batch."""
    fw = result_label(res)
    out = _growth_text(fw, res.get("batch_growth", []))
    drops = res["slower_with_larger_batch"]
    if drops:
        for h in sorted({d["hidden"] for d in drops}):
            items = ", ".join(f"{d['variant']} {d['from_batch']}->{d['to_batch']} "
                              f"(-{100 * d['drop']:.0f}%)" for d in drops if d["hidden"] == h)
            out.append(f"- {fw} hidden {h}: a larger batch is slower (GFLOP/s) at {items}")
    else:
        out.append(f"- {fw}: no larger batch ran at lower GFLOP/s (beyond "
                   f"{100 * SLOWER_MARGIN:.0f}%)")
    wins = res["pretranspose"]
    for w in wins:
        how = "consistently" if w["consistent"] else "at some sizes"
        out.append(f"- {fw} hidden {w['hidden']}: {w['variant']} is {how} slower than its "
                   f"pre-transposed twin ({len(w['batches'])}/{w['of']} batch sizes: "
                   f"{', '.join(map(str, w['batches']))}; x{w['median_speedup']:.2f} median): "
                   f"{_advice(w['variant'])}")
    if not wins:
        out.append(f"- {fw}: no variant slower than its pre-transposed twin (beyond "
                   f"{100 * SLOWER_MARGIN:.0f}%)")
    return out


def _advice(variant: str) -> str:
    return {"NN": "keep the weight stored transposed for the forward",
            "TN": "keep a transposed copy of the weight for the backward",
            "NT": "materialise the activations transposed for the weight gradient"}[variant]
