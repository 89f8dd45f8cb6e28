"""Horovod or PyTorch's DDP for this model on this machine: words/s, efficiency and paired
ratios at np=N, with where each spends its step.

Variants, per config (the demo config and configs/commheavy_torch.yaml): horovod at its
defaults and tuned, ddp at its defaults and tuned, ps, independent; on the comm-heavy config
also Horovod's fp16 compression, DDP's fp16 hook and PowerSGD. Every round runs every variant
once (order rotated per round: interleaved, paired rounds); the 1-minute load is recorded
before and after every run. Reported: medians, efficiency against independent replicas of the
same round, the paired per-round ratio horovod / ddp with its spread (min-max), and a step
breakdown read from Horovod's timeline (traced after the window) and DDP's own logging
(``_get_ddp_logging_data``: sampled forward, backward and backward-communication times).
A last, tiny epoch-mode pair times DDP's two idle modes (zero step vs join).

    python bench/bench_ddp.py --np 2 --rounds 3 --configs configs/demo.yaml \
        --json bench/results/ddp_demo.json                                   # ~6 min
    python bench/bench_ddp.py --np 2 --rounds 3 --configs configs/commheavy_torch.yaml \
        --set measure.steps=20 --no-idle --json bench/results/ddp_commheavy.json  # ~7 min
    python bench/bench_ddp.py --render bench/results/ddp_demo.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from emit import emit, paired, words_per_s  # bench/ is on sys.path when a script runs

from hvdscale.records.run import RunRecord
from hvdscale.study.sweep.one_run import RunLaunch, launch_run

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ("configs/demo.yaml", "configs/commheavy_torch.yaml")
TUNED_HVD = "strategy.horovod.fusion_threshold_mb=4,strategy.horovod.cycle_time_ms=5"
"""``hvdscale fusion``'s best candidate on the demo config (bench/BENCHMARKS.md's fusion run)."""
TUNED_DDP = "strategy.ddp.bucket_cap_mb=1"
"""``hvdscale fusion --strategy ddp``'s pick on the demo config (2 short rounds, x1.20-1.36)."""
HVD_TRACE = ("strategy.horovod.timeline=auto", "strategy.horovod.timeline_steps=3")
IDLE_SETS = ("measure.epochs=1", "measure.warmup_steps=2", "data.bucketing.enabled=true",
             "data.bucketing.boundaries=[8,16]", "data.synthetic.sentences_per_rank=256")


def variants(config: str, tuned_hvd: str, tuned_ddp: str) -> dict[str, tuple[str, ...]]:
    """Variant name -> its ``--set`` overrides on ``config``."""
    hv = ("strategy.name=horovod", *HVD_TRACE)
    out = {"independent": ("strategy.name=independent",), "horovod": hv,
           "horovod tuned": (*hv, *tuned_hvd.split(",")), "ddp": ("strategy.name=ddp",),
           "ddp tuned": ("strategy.name=ddp", *tuned_ddp.split(",")), "ps": ("strategy.name=ps",)}
    if "commheavy" in config:
        out["horovod fp16"] = (*hv, "strategy.horovod.compression=fp16")
        out["ddp fp16 hook"] = ("strategy.name=ddp", "strategy.ddp.comm_hook=fp16")
        out["ddp powersgd"] = ("strategy.name=ddp", "strategy.ddp.comm_hook=powersgd",
                               "strategy.ddp.powersgd_start_iter=2")
    return out


def run_once(config: str, np_: int, sets: tuple[str, ...], out: str) -> dict:
    """One ``mpirun -np N hvdscale run``; returns its record with the load around it."""
    before = os.getloadavg()
    rec = launch_run(np_, config, out, sets, RunLaunch(cwd=ROOT))
    return {"words_per_s": rec.words_per_s, "step_ms": rec.step_median_s * 1e3,
            "breakdown": breakdown(rec), "load_before": list(before),
            "load_after": list(os.getloadavg())}


def breakdown(rec: RunRecord) -> dict:
    """Where a step goes, in one shape for both: step, compute and communication (ms)."""
    s = rec.strategy
    out = {"step_ms": rec.step_median_s * 1e3}
    log = s.get("ddp_logging")
    if log:  # nanoseconds, DDP's sampled iterations
        out.update(forward_ms=log.get("avg_forward_compute_time", 0) / 1e6,
                   backward_ms=log.get("avg_backward_compute_time", 0) / 1e6,
                   comm_ms=log.get("avg_backward_comm_time", 0) / 1e6,
                   overlap_ms=log.get("avg_backward_compute_comm_overlap_time", 0) / 1e6,
                   buckets=len(str(s.get("bucket_sizes", "")).split(",")))
    med = rec.timeline_summary.get("median") or {}
    if med:
        out.update(comm_ms=med.get("allreduce_ms"), fused_buffers=med.get("fused_buffers"))
    return out




def measure(args: argparse.Namespace) -> dict:
    """Every config's rounds, then the idle-mode pair; the raw result."""
    res: dict = {"np": args.np, "rounds": args.rounds, "set": args.set, "configs": {}}
    with tempfile.TemporaryDirectory() as out:
        for config in args.configs:
            vs = variants(config, args.tuned_horovod, args.tuned_ddp)
            runs: dict[str, list[dict]] = {v: [] for v in vs}
            names = list(vs)
            for r in range(args.rounds):
                order = names[r % len(names):] + names[: r % len(names)]
                for v in order:
                    runs[v].append(run_once(config, args.np, (*vs[v], *args.set), out))
                    print(f"{config} round {r + 1}/{args.rounds} {v:14s} "
                          f"{runs[v][-1]['words_per_s']:.0f} words/s", file=sys.stderr,
                          flush=True)
            res["configs"][config] = {"variants": {v: list(vs[v]) for v in vs}, "runs": runs}
        idle: dict[str, list[dict]] = {"zero": [], "join": []}
        for r in range(0 if args.no_idle else args.rounds):
            for mode in (("zero", "join") if r % 2 == 0 else ("join", "zero")):
                sets = (*IDLE_SETS, "strategy.name=ddp", f"strategy.ddp.idle={mode}", *args.set)
                idle[mode].append(run_once(args.configs[0], args.np, sets, out))
        res["idle"] = idle
    return res




def render(res: dict) -> str:
    """The BENCHMARKS.md tables, from the raw result alone."""
    lines = [f"np={res['np']}, {res['rounds']} interleaved rounds; quiet={res.get('quiet')}.", ""]
    for config, c in res["configs"].items():
        runs = c["runs"]
        ind = words_per_s(runs["independent"])
        lines += [f"**{config}**", "",
                  "|Variant|Words/s (median)|Efficiency vs independent (%)|Step (ms)|"
                  "Comm (ms)|Forward+backward (ms)|",
                  "|:--|--:|--:|--:|--:|--:|"]
        for v, rs in runs.items():
            eff = paired(words_per_s(rs), ind)
            bd = rs[-1]["breakdown"]
            fb = (bd.get("forward_ms", 0) + bd.get("backward_ms", 0)) if "forward_ms" in bd \
                else None
            step = statistics.median(r["step_ms"] for r in rs)
            lines.append(f"|{v}|{statistics.median(words_per_s(rs)):.0f}|{100 * eff['median']:.1f}|"
                         f"{step:.1f}|{_f(bd.get('comm_ms'))}|{_f(fb)}|")
        lines.append("")
        for a, b in (("horovod", "ddp"), ("horovod tuned", "ddp tuned"),
                     ("horovod fp16", "ddp fp16 hook"), ("ddp powersgd", "ddp")):
            if a in runs and b in runs:
                p = paired(words_per_s(runs[a]), words_per_s(runs[b]))
                lines.append(f"- {a} / {b}: x{p['median']:.3f} (rounds {p['min']:.3f}-"
                             f"{p['max']:.3f}, n={p['n']})")
        lines.append("")
    idle = res.get("idle") or {}
    if idle.get("zero") and idle.get("join"):
        p = paired(words_per_s(idle["join"]), words_per_s(idle["zero"]))
        lines.append(f"DDP idle ranks (epoch mode, bucketed): join / zero step x{p['median']:.3f} "
                     f"(rounds {p['min']:.3f}-{p['max']:.3f}, n={p['n']}); "
                     f"zero {statistics.median(words_per_s(idle['zero'])):.0f} words/s, "
                     f"join {statistics.median(words_per_s(idle['join'])):.0f} words/s.")
    return "\n".join(lines) + "\n"


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--tuned-horovod", default=TUNED_HVD,
                    help="comma-separated --set values of 'horovod tuned' (hvdscale fusion's "
                    "recommendation)")
    ap.add_argument("--tuned-ddp", default=TUNED_DDP,
                    help="comma-separated --set values of 'ddp tuned' (hvdscale fusion "
                    "--strategy ddp's recommendation)")
    ap.add_argument("--set", action="append", default=[], help="applied to every run")
    ap.add_argument("--no-idle", action="store_true",
                    help="skip the idle-mode pair (zero step vs join, on the first config)")
    ap.add_argument("--json", default="")
    ap.add_argument("--render", default="", metavar="RAW.json")
    args = ap.parse_args()
    if args.render:
        print(render(json.loads(Path(args.render).read_text())), end="")
        return 0
    args.configs = args.configs.split(",")
    t0 = time.monotonic()
    res = measure(args)
    res["wall_s"] = time.monotonic() - t0
    print(render(emit(res, args.json)), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
