"""One-command check of the GPU path (``evidence/gpu_check.sh``): needs a GPU, the checkout and a
Python with torch; Horovod and MPI are optional (without them only np=1 runs, and it says so).

1. ``configs/demo.yaml`` with ``device=cuda`` for ``fused`` and ``loop``, np=1 (and np=2 on
   one GPU, ranks sharing it, when mpirun is there), through ``hvdscale run``. np=2 uses
   strategy ddp (gloo), which works with two ranks on one GPU; Horovod built with NCCL
   refuses that by design (hvdscale says so), so it is not what this check runs.
2. cuDNN ran for ``fused``: kernel names from ``torch.profiler`` of one training step contain
   cuDNN's RNN kernels, and those of ``loop`` do not.
3. Synchronised timing: the same steps timed with and without ``torch.cuda.synchronize`` at
   the end; unsynchronised timing stops the clock with work still queued, so its words/s must
   not be lower than the synchronised one (usually it is higher).
Writes every figure as JSON (``--out``, default ``bench/results/gpu_check-<host>.json``),
always: a part that fails is recorded in ``failed`` (with its error) and the others still run.
``--rehearse-cpu`` runs the same code on the CPU with tiny sizes (CI's rehearsal): its JSON says
``"rehearsal": "cpu"`` and holds no GPU figure; the cuDNN check is then not applicable.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:  # hvdscale is imported where it is used: the script starts without it
    from hvdscale.records.run import RunRecord

ROOT = Path(__file__).resolve().parents[1]
TINY = ["measure.warmup_steps=3", "measure.steps=10"]
SMALL: list[str] = []
"""Overrides of every run and step (the CPU rehearsal's tiny sizes)."""
NP2_STRATEGY = "ddp"
"""np=2 shares one GPU: ddp's gloo works there; a Horovod built with NCCL refuses it."""


class PartFailed(Exception):
    """One part of the check failed; the message is what the JSON records."""


def fail(msg: str) -> None:
    """One clear line and exit 2."""
    print(f"gpu_check: ERROR: {msg}", file=sys.stderr, flush=True)
    sys.exit(2)


def need_gpu() -> Any:
    """torch with a visible GPU, or a clear failure naming CUDA_VISIBLE_DEVICES."""
    try:
        import torch
    except ImportError:
        fail(f"this Python ({sys.executable}) has no torch")
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
        fail("no GPU visible to torch (torch.cuda.is_available() is False; CUDA "
             f"{torch.version.cuda or 'not in this torch build'}; CUDA_VISIBLE_DEVICES="
             f"{'unset' if cvd is None else repr(cvd)}): run this on a machine with a GPU")
    return torch


def can_run_np2() -> str | None:
    """None when mpirun and torch.distributed's gloo (strategy ddp) are usable, else why not."""
    if shutil.which("mpirun") is None:
        return "no mpirun on PATH"
    r = subprocess.run([sys.executable, "-c", "import torch.distributed as d; "
                        "assert d.is_available() and d.is_gloo_available()"], capture_output=True)
    return None if r.returncode == 0 else "torch.distributed has no gloo"


def run_demo(impl: str, np: int, device: str, sets: list[str]) -> RunRecord:
    """One ``hvdscale run`` of the demo on ``device``; returns its record. np > 1 is launched
    as a sweep point is (``launch_run``: the sweep's mpirun line and environment)."""
    from hvdscale.errors import HvdscaleError
    from hvdscale.records.run import RunRecord
    from hvdscale.records.store import read_records
    from hvdscale.study.sweep.launcher import rank_command
    from hvdscale.study.sweep.one_run import RunLaunch, launch_run

    out = tempfile.mkdtemp(prefix="gpu_check-")
    strategy = [f"strategy.name={NP2_STRATEGY}"] if np > 1 else []
    sets = [f"device={device}", f"model.rnn_impl={impl}", *TINY, *SMALL, *strategy, *sets]
    if np > 1:
        try:
            return launch_run(np, "configs/demo.yaml", out, sets, RunLaunch(
                launcher_args=("--oversubscribe",), timeout_s=900, cwd=ROOT))
        except HvdscaleError as e:
            raise PartFailed(f"{impl} np={np}: {e}") from None
    r = subprocess.run(rank_command("run", "configs/demo.yaml", out, sets), cwd=ROOT,
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise PartFailed(f"{impl} np={np} exit {r.returncode}: {r.stderr.strip()[-1500:]}")
    rec = read_records(out)[-1]
    if not isinstance(rec, RunRecord):
        raise PartFailed(f"{impl} np={np} wrote a {rec.kind} record, not a run's")
    return rec


def _adapter(impl: str, device: str) -> Any:
    from hvdscale.config import load_config
    from hvdscale.core.batching import BatchPlan, per_rank_batch_size
    from hvdscale.core.device import resolve_device
    from hvdscale.corpora.corpus import load_corpus
    from hvdscale.frameworks.torch import TorchAdapter

    cfg = load_config(str(ROOT / "configs/demo.yaml"), [f"model.rnn_impl={impl}", *SMALL])
    placement = resolve_device(device, 1, 0, 1)
    m = cfg.model
    adapter = TorchAdapter(m, cfg.optim, m.src_vocab, m.tgt_vocab, placement)
    corpus = load_corpus(cfg.data, m.kind, m.src_vocab, m.tgt_vocab, 0, 1)
    plan = BatchPlan(corpus, cfg.data, m.kind, per_rank_batch_size(cfg.data, 0, 1), 0)
    return adapter, plan.batches()


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def kernel_names(impl: str, device: str) -> list[str]:
    """Kernel names of one training step of the demo model, from torch.profiler (CUDA kernels;
    on the CPU rehearsal, CPU operators)."""
    from torch.profiler import ProfilerActivity, profile

    adapter, batches = _adapter(impl, device)
    batch = next(batches)
    adapter.zero_grad()
    adapter.forward_backward(batch, 1.0)  # warm-up: cuDNN plans, allocator
    act = ProfilerActivity.CUDA if device == "cuda" else ProfilerActivity.CPU
    with profile(activities=[act]) as prof:
        adapter.zero_grad()
        adapter.forward_backward(batch, 1.0)
        adapter.step()
        _sync(device)
    return sorted({e.key for e in prof.key_averages()})


def is_cudnn_rnn(name: str) -> bool:
    """cuDNN's RNN kernels: named after cudnn, or its RNN/LSTM persistent/elementwise kernels."""
    low = name.lower()
    return "cudnn" in low or "rnn_" in low or "lstm_elementwise" in low


def timing(impl: str, device: str, steps: int = 20) -> dict[str, Any]:
    """words/s of the same steps with and without a device synchronisation before the clock."""
    adapter, batches = _adapter(impl, device)
    model, opt = adapter.model, adapter.optimizer
    data = [next(batches) for _ in range(steps + 3)]
    tensors = [adapter.tensors(b) for b in data]
    words = sum(b.words for b in data[3:])

    def run(sync: bool) -> float:
        for t in tensors[:3]:
            opt.zero_grad(set_to_none=False)
            loss, _ = model(**t)
            loss.backward()
            opt.step()
        _sync(device)
        t0 = time.perf_counter()
        for t in tensors[3:]:
            opt.zero_grad(set_to_none=False)
            loss, _ = model(**t)  # never .item(): that would synchronise
            loss.backward()
            opt.step()
        if sync:
            _sync(device)
        dt = time.perf_counter() - t0
        _sync(device)
        return dt

    pairs = [(run(False), run(True)) for _ in range(3)]  # interleaved, paired
    unsync = sorted(p[0] for p in pairs)[1]
    synced = sorted(p[1] for p in pairs)[1]
    return {"steps": steps, "words": words, "unsynced_s": unsync, "synced_s": synced,
            "words_per_s_unsynced": words / unsync, "words_per_s_synced": words / synced,
            "pairs_s": pairs}


def demo_runs(result: dict[str, Any], device: str) -> None:
    """Part 1: the demo through ``hvdscale run``, fused and loop, np=1 and (ddp) np=2."""
    why_not = can_run_np2()
    result["np2_skipped_because"] = why_not
    if why_not:
        print(f"gpu_check: np=1 only: {why_not}", flush=True)
    for np in [1] if why_not else [1, 2]:
        for impl in ("fused", "loop"):
            rec = run_demo(impl, np, device, [])
            where = msgspec.to_builtins(rec.device)  # sections are Structs: plain JSON here
            result["runs"].append({"np": np, "rnn_impl": impl,
                                   "words_per_s": rec.words_per_s,
                                   "strategy": rec.strategy_name,
                                   "step_time_median_s": rec.step_median_s,
                                   "device": where,
                                   "gpu_operations":
                                       rec.strategy.get("gpu_operations"),
                                   "memory": msgspec.to_builtins(rec.memory)})
            print(f"gpu_check: demo {impl} np={np}: {rec.words_per_s:.0f} words/s",
                  flush=True)
            if where["per_rank"][0]["kind"] != device:
                raise PartFailed(f"{impl} np={np} did not run on {device}: {where}")


def cudnn_check(result: dict[str, Any], device: str) -> None:
    """Part 2: cuDNN's RNN kernels in fused's step and not in loop's."""
    fused_k, loop_k = kernel_names("fused", device), kernel_names("loop", device)
    fused_cudnn = [k for k in fused_k if is_cudnn_rnn(k)]
    loop_cudnn = [k for k in loop_k if is_cudnn_rnn(k)]
    result["checks"]["cudnn"] = {"fused_cudnn_kernels": fused_cudnn,
                                 "loop_cudnn_kernels": loop_cudnn,
                                 "fused_all_kernels": fused_k, "loop_all_kernels": loop_k,
                                 "ok": bool(fused_cudnn) and not loop_cudnn}
    if device != "cuda":  # the CPU has no cuDNN: the code ran, the verdict does not apply
        result["checks"]["cudnn"].update(ok=None, not_applicable="CPU rehearsal: no cuDNN")


def sync_check(result: dict[str, Any], device: str, steps: int) -> None:
    """Part 3: unsynchronised timing is never slower than synchronised timing."""
    for impl in ("fused", "loop"):
        t = timing(impl, device, steps)
        # Without a sync the clock stops while kernels are still queued: never slower.
        t["ok"] = t["words_per_s_unsynced"] >= t["words_per_s_synced"] * 0.98
        if device != "cuda":  # no queue on the CPU: a tie, judged by noise alone
            t.update(ok=None, not_applicable="CPU rehearsal: nothing is queued")
        result["checks"][f"sync_{impl}"] = t


def main() -> int:
    """Run every part, write the JSON; exit 2 where a part failed or no GPU is visible."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="", help="JSON path (default bench/results/"
                    "gpu_check-<host>.json)")
    ap.add_argument("--rehearse-cpu", action="store_true",
                    help="the same code on the CPU, tiny sizes; no GPU figures (CI)")
    args = ap.parse_args()
    device = "cpu" if args.rehearse_cpu else "cuda"
    if args.rehearse_cpu:
        import torch

        TINY.extend(["measure.warmup_steps=1", "measure.steps=3"])
        SMALL.extend(["model.embed_dim=32", "model.hidden_size=32", "model.src_vocab=300",
                      "model.tgt_vocab=300", "data.batch_size=8",
                      "data.synthetic.sentences_per_rank=64", "data.synthetic.max_len=10"])
        torch.set_num_threads(1)
    else:
        torch = need_gpu()
    from hvdscale.core.device import resolve_device
    from hvdscale.frameworks.torch import gpu_provenance
    from hvdscale.records.provenance import versions

    out = args.out or str(ROOT / "bench/results" / f"gpu_check-{socket.gethostname()}.json")
    result: dict[str, Any] = {"host": socket.gethostname(), "loadavg": os.getloadavg(),
                              "rehearsal": "cpu" if args.rehearse_cpu else None,
                              "versions": versions(),
                              "gpu": None if args.rehearse_cpu else
                              gpu_provenance(resolve_device("cuda", 1, 0, 1)),
                              "runs": [], "checks": {}, "failed": {}}
    parts = [("demo_runs", lambda: demo_runs(result, device)),
             ("cudnn", lambda: cudnn_check(result, device)),
             ("sync", lambda: sync_check(result, device, 3 if args.rehearse_cpu else 20))]
    for name, part in parts:  # each part on its own: one failing must not lose the others
        try:
            part()
        except Exception as e:  # recorded in the JSON, then reported
            result["failed"][name] = f"{type(e).__name__}: {e}"
            print(f"gpu_check: part {name} failed: {type(e).__name__}: {str(e)[-500:]}",
                  file=sys.stderr, flush=True)
        Path(out).write_text(json.dumps(result, indent=1))  # after every part: never lost
    bad = [k for k, v in result["checks"].items() if v["ok"] is False]
    where = "CPU rehearsal (no GPU figures)" if args.rehearse_cpu else f"GPU {result['gpu']}"
    print(f"gpu_check: wrote {out}; torch {torch.__version__}, {where}")
    if result["failed"]:
        fail(f"parts failed: {', '.join(result['failed'])} (details in {out})")
    if bad:
        fail(f"checks failed: {', '.join(bad)} (details in {out})")
    print("gpu_check: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
