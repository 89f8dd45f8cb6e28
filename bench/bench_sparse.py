"""Sparse embedding-gradient merging at a realistic vocabulary (issue 25), in paired rounds.

Each round runs every variant once, in an order rotated round by round, as
``mpirun -np 2 python -m hvdscale run configs/bigvocab_<fw>.yaml --set ...``: the parameter
server dense / sparse / auto (colocated), dense / sparse (dedicated server), Horovod dense /
gathered. Bytes per step are one worker's sent + received bytes: for the parameter server
the record's push + pull (counted by the servers over all workers) divided by its workers, for
Horovod one rank's share of the ring and allgather from the touched rows measured on the data
(``hvdscale.study.predict.sparse_bytes``); words/s from the record.
Within a round each sparse variant is divided by its dense twin, and ``auto`` by the better
fixed setting of that round; medians and min-max spreads over rounds are reported with the
1-minute load before and after every run.

    python bench/bench_sparse.py --rounds 2 --json bench/results/sparse.json
    python bench/bench_sparse.py --render bench/results/sparse.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from emit import emit  # bench/ is on sys.path when a script runs

from hvdscale.study.sweep.one_run import RunLaunch, launch_run

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {
    "ps-colocated-dense": ["strategy.name=ps", "strategy.ps.sparse_embeddings=off"],
    "ps-colocated-sparse": ["strategy.name=ps", "strategy.ps.sparse_embeddings=on"],
    "ps-colocated-auto": ["strategy.name=ps", "strategy.ps.sparse_embeddings=auto"],
    "ps-dedicated-dense": ["strategy.name=ps", "strategy.ps.placement=dedicated",
                           "strategy.ps.sparse_embeddings=off"],
    "ps-dedicated-sparse": ["strategy.name=ps", "strategy.ps.placement=dedicated",
                            "strategy.ps.sparse_embeddings=on"],
    "horovod-dense": ["strategy.name=horovod", "strategy.horovod.embedding_grads=dense"],
    "horovod-gathered": ["strategy.name=horovod", "strategy.horovod.embedding_grads=gathered"],
}
PAIRS = [("ps-colocated-sparse", "ps-colocated-dense"), ("ps-dedicated-sparse",
                                                         "ps-dedicated-dense"),
         ("horovod-gathered", "horovod-dense")]


def horovod_bytes(cfg_path: str, sets: list[str], np_: int) -> float:
    """Bytes one rank sends and receives per step under Horovod: a ring allreduce moves
    2(n-1)/n of its bytes each way; gathered embedding gradients go by allgather, (n-1) times
    one rank's rows each way (rows per framework as ``hvdscale.study.predict.sparse_bytes`` counts
    them on the data)."""
    from hvdscale.config import load_config
    from hvdscale.study.predict.inputs import gradient_bytes
    from hvdscale.study.predict.sparse_bytes import gathered_tensor_bytes

    cfg = load_config(cfg_path, sets)
    dense = gradient_bytes(cfg)
    gathered = gathered_tensor_bytes(cfg, np_) or (0,) * len(dense)
    reduced = sum(b for b, g in zip(dense, gathered, strict=True) if not g)
    return 4 * (np_ - 1) / np_ * reduced + 2 * (np_ - 1) * sum(gathered)


def one_run(fw: str, name: str, args: argparse.Namespace, out: Path) -> dict:
    """One run of a variant; its words/s, bytes per step and the load around it."""
    cfg = str(ROOT / "configs" / f"bigvocab_{fw}.yaml")
    sets = [*VARIANTS[name], f"measure.steps={args.steps}",
            f"measure.warmup_steps={args.warmup}"]
    before = list(os.getloadavg())
    rec = launch_run(args.np, cfg, out, sets,
                     RunLaunch(quiet=True, launcher_args=("--oversubscribe",),
                               env={"TF_CPP_MIN_LOG_LEVEL": "2"}, timeout_s=900, cwd=ROOT))
    st = rec.strategy
    workers = len(st["workers"]) if name.startswith("ps") else 1
    if name.startswith("ps"):
        sx = st.get("sparse_embeddings", {})
        if sx.get("active"):  # the servers' counts: push + pull summed over all workers
            b = sx["bytes_per_step"]
            nbytes = b["push_bytes"] + b["pull_bytes"]
        else:  # dense: every worker pushes and pulls the whole model
            nbytes = 2.0 * workers * rec.model_params * 4
    else:
        nbytes = horovod_bytes(cfg, sets, args.np)
    return {"words_per_s": rec.words_per_s, "bytes_per_step": nbytes,
            "bytes_per_worker_step": nbytes / workers, "workers": workers,
            "choices": st.get("sparse_embeddings", {}).get("choices"),
            "load_before": before, "load_after": list(os.getloadavg())}


def rounds(fw: str, args: argparse.Namespace, scratch: Path) -> list[dict]:
    """``args.rounds`` rounds of every variant, the order rotated each round."""
    names = list(VARIANTS)
    out = []
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        got = {n: one_run(fw, n, args, scratch / f"{fw}-{n}-{r}") for n in order}
        ratios = {f"{a}/{b}": got[a]["words_per_s"] / got[b]["words_per_s"] for a, b in PAIRS}
        best = max(got["ps-colocated-dense"]["words_per_s"],
                   got["ps-colocated-sparse"]["words_per_s"])
        ratios["auto/best-fixed"] = got["ps-colocated-auto"]["words_per_s"] / best
        out.append({"round": r, "order": order, "runs": got, "ratios": ratios})
        print(f"{fw} round {r}: " + ", ".join(f"{k} {v:.3f}" for k, v in ratios.items()),
              file=sys.stderr)
    return out


def worker_bytes(raw: dict, name: str, run: dict) -> float:
    """One worker's sent + received bytes per step of a run. Raw files before
    ``bytes_per_worker_step`` hold the parameter server's bytes summed over its workers: np
    colocated, np - 1 dedicated (the variants keep the config's one server)."""
    if "bytes_per_worker_step" in run:
        return run["bytes_per_worker_step"]
    if not name.startswith("ps"):
        return run["bytes_per_step"]
    return run["bytes_per_step"] / (raw["np"] - (1 if "dedicated" in name else 0))


def render(raw: dict) -> str:
    """The markdown table for BENCHMARKS.md, from the raw result alone."""
    lines = ["| framework | variant | bytes/step per worker (MB) | words/s (median) "
             "| vs dense (median, min-max) |", "|:--|:--|--:|--:|:--|"]
    for fw, rs in raw["frameworks"].items():
        twin = {a: f"{a}/{b}" for a, b in PAIRS}
        twin["ps-colocated-auto"] = "auto/best-fixed"
        for name in VARIANTS:
            wps = [r["runs"][name]["words_per_s"] for r in rs]
            mb = statistics.median(worker_bytes(raw, name, r["runs"][name]) for r in rs) / 1e6
            cell = ""
            if name in twin:
                q = [r["ratios"][twin[name]] for r in rs]
                label = "vs best fixed" if name.endswith("auto") else ""
                cell = f"{statistics.median(q):.3f} ({min(q):.3f}-{max(q):.3f}) {label}".strip()
            lines.append(f"| {fw} | {name} | {mb:.1f} | {statistics.median(wps):.0f} | {cell} |")
    lines.append(f"\nquiet: {raw['quiet']} (max 1-minute load {raw['load_max']:.2f}); "
                 f"np={raw['np']}, {raw['rounds_per_framework']} rounds, "
                 f"{raw['steps']} measured steps per run")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frameworks", default="torch,tf")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--quiet-load", type=float, default=2.5)
    ap.add_argument("--json", default="")
    ap.add_argument("--render", default="", help="print the table of a raw JSON result")
    args = ap.parse_args()
    if args.render:
        print(render(json.loads(Path(args.render).read_text())))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        res = {fw: rounds(fw, args, Path(tmp)) for fw in args.frameworks.split(",")}
    loads = [x[k][0] for rs in res.values() for r in rs for x in r["runs"].values()
             for k in ("load_before", "load_after")]
    raw = {"bench": "sparse", "np": args.np, "steps": args.steps, "warmup": args.warmup,
           "rounds_per_framework": args.rounds, "frameworks": res, "load_max": max(loads),
           "quiet": max(loads) <= args.quiet_load, "quiet_load": args.quiet_load}
    emit(raw, args.json)
    print(render(raw))
    return 0


if __name__ == "__main__":
    sys.exit(main())
