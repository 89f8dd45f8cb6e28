"""How close a single GPU's training step comes to what its GEMMs can do (issue 31), from the
raw results ``bench/gpu_device.sh`` writes:

    python -m hvdscale.study.gpu_limit OUT      (OUT/seeds and OUT/gemm hold the records)

Per seed-notes run (fused or loop, TF32 off or on): words/s beside the notes' figures, the
step's useful TFLOP/s (``step_flops``), and the GEMM curve's TFLOP/s at the same shape (M = 4 x
hidden, K = hidden, N = the per-rank batch, forward NN, matching precision); their ratio is the
fraction of the reachable GEMM speed the whole step gets.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from hvdscale.study.step_flops import achieved

NOTES = {"fused": (55411, 51046), "loop": (43398, 39369)}
"""Seed 000 and 001 words/s on one GPU: cudnn_lstm (fused) and dynamic_rnn (loop)."""


def _records(path: Path) -> list[dict[str, Any]]:
    f = path / "results.jsonl"
    if not f.exists():
        return []
    return [r for r in map(json.loads, f.read_text().splitlines()) if r.get("status") == "ok"]


def gemm_tflops(gemm: dict[str, Any] | None, hidden: int, batch: int,
                precision: str) -> float | None:
    """The NN GEMM's TFLOP/s at (hidden, the nearest measured batch) in ``precision``."""
    if gemm is None:
        return None
    for res in gemm["frameworks"]:
        if res.get("precision", "fp32") != precision:
            continue
        rows = [r for r in res["rows"] if r["hidden"] == hidden and r["variant"] == "NN"]
        if rows:
            best = min(rows, key=lambda r: abs(r["batch"] - batch))
            return best["gflops"] / 1e3
    return None


def limit_rows(runs: list[dict[str, Any]], gemm: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One row per run: impl, TF32, words/s, useful and GEMM TFLOP/s, their ratio."""
    rows = []
    for r in runs:
        m, tf32 = r["config"]["model"], r["config"].get("tf32", "default")
        got = achieved(r)
        g = gemm_tflops(gemm, m["hidden_size"], r["config"]["data"]["batch_size"],
                        "tf32" if tf32 == "on" else "fp32")
        rows.append({"impl": m["rnn_impl"], "tf32": tf32, "words_per_s": r["words_per_s"],
                     "gpu": ((r.get("device") or {}).get("gpu") or {}).get("model"),
                     "useful_tflops": got["tflops_per_rank"], "gemm_tflops": g,
                     "fraction": got["tflops_per_rank"] / g if g else None})
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    """The table, beside the seed notes' words/s."""
    out = ["|GPU|impl|TF32|words/s|notes 000 / 001|useful TFLOP/s|GEMM TFLOP/s (NN, same shape)"
           "|fraction|", "|:--|:--|:--|--:|--:|--:|--:|--:|"]
    for x in rows:
        g = f"{x['gemm_tflops']:.1f}" if x["gemm_tflops"] else "-"
        f = f"{100 * x['fraction']:.0f}%" if x["fraction"] else "-"
        n = NOTES[x["impl"]]
        out.append(f"|{x['gpu']}|{x['impl']}|{x['tf32']}|{x['words_per_s']:,.0f}|"
                   f"{n[0]:,} / {n[1]:,}|{x['useful_tflops']:.2f}|{g}|{f}|")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    """Print the table for the results folder ``argv[0]``."""
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python -m hvdscale.study.gpu_limit OUT (a bench/gpu_device.sh folder)",
              file=sys.stderr)
        return 2
    out = Path(argv[0])
    gemms = [r for r in _records(out / "gemm") if r.get("kind") == "gemm"]
    runs = [r for r in _records(out / "seeds") if "words_per_s" in r]
    print(markdown(limit_rows(runs, gemms[-1] if gemms else None)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
