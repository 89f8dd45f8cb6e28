"""Words/s of the working tree against an earlier git revision, in paired rounds.

A refactor that must not change what a run measures is checked here: each round runs the same
``mpirun -np N python -m hvdscale run CONFIG`` once from the working tree and once from
``--base`` (exported with ``git archive`` into a scratch directory and imported from there), in
alternating order, and the ratio working tree / base is taken within the round. The median
ratio and its spread (min, max) are reported with every round's 1-minute load average before and
after; the result is labelled quiet only when every load stayed at or below ``--quiet-load``.

    python bench/bench_revisions.py --base 3f3f4d2 --rounds 6 --json bench/results/revisions.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from emit import emit  # bench/ is on sys.path when a script runs

from hvdscale.study.sweep.one_run import RunLaunch, launch_run

ROOT = Path(__file__).resolve().parents[1]


def export(rev: str, dest: Path) -> Path:
    """The tree of ``rev`` under ``dest``, importable as ``hvdscale`` (its models too)."""
    archive = dest / "tree.tar"
    with archive.open("wb") as f:
        subprocess.run(["git", "archive", rev], cwd=ROOT, stdout=f, check=True)
    tree = dest / "tree"
    with tarfile.open(archive) as t:
        t.extractall(tree, filter="data")
    # Revisions before the models moved into the package kept them in a top-level models/
    # that only the install mapped to hvdscale.models; give such an export the same view.
    inner = tree / "hvdscale" / "models"
    if not inner.exists():
        inner.symlink_to(tree / "models", target_is_directory=True)
    return tree


def one_run(tree: Path, args: argparse.Namespace, out: Path) -> dict:
    """One run of the config from ``tree`` (its directory first on the import path)."""
    before = os.getloadavg()[0]
    rec = launch_run(args.np, Path(args.config).resolve(), out, args.set,
                     RunLaunch(quiet=True,
                               env={"TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(tree)},
                               timeout_s=900, cwd=tree))
    return {"words_per_s": rec.words_per_s, "load_before": before,
            "load_after": os.getloadavg()[0]}


def rounds(base: Path, args: argparse.Namespace, scratch: Path) -> list[dict]:
    """``args.rounds`` pairs, the order alternating, each with its ratio head / base."""
    out = []
    for r in range(args.rounds):
        order = ("head", "base") if r % 2 == 0 else ("base", "head")
        got = {}
        for side in order:
            got[side] = one_run(ROOT if side == "head" else base, args, scratch / f"{side}{r}")
        out.append({"order": list(order), **got,
                    "ratio": got["head"]["words_per_s"] / got["base"]["words_per_s"]})
        print(f"round {r}: head/base {out[-1]['ratio']:.3f}", file=sys.stderr)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="git revision to compare with")
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--set", action="append", default=[], help="a --set for both runs")
    ap.add_argument("--quiet-load", type=float, default=2.5)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = export(args.base, Path(tmp))
        pairs = rounds(base, args, Path(tmp))
    base_rev = subprocess.run(["git", "rev-parse", args.base], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
    head_rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
    ratios = [p["ratio"] for p in pairs]
    loads = [p[s][k] for p in pairs for s in ("head", "base") for k in ("load_before",
                                                                         "load_after")]
    emit({"bench": "revisions", "config": args.config, "np": args.np, "sets": args.set,
          "base": base_rev, "head": head_rev, "rounds": pairs,
          "ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
          "ratio_max": max(ratios), "load_max": max(loads),
          "quiet": max(loads) <= args.quiet_load, "quiet_load": args.quiet_load}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
