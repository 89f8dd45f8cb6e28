"""One-command check of the GPU path (``bench/gpu_check.sh``): needs a GPU, the checkout and a
Python with torch; Horovod and MPI are optional (without them only np=1 runs, and it says so).

1. ``configs/demo.yaml`` with ``device=cuda`` for ``fused`` and ``loop``, np=1 (and np=2 on
   one GPU, ranks sharing it, when mpirun and Horovod are there), through ``hvdscale run``.
2. cuDNN ran for ``fused``: kernel names from ``torch.profiler`` of one training step contain
   cuDNN's RNN kernels, and those of ``loop`` do not.
3. Synchronised timing: the same steps timed with and without ``torch.cuda.synchronize`` at
   the end; unsynchronised timing stops the clock with work still queued, so its words/s must
   not be lower than the synchronised one (usually it is higher).
Writes every figure as JSON (``--out``, default ``bench/results/gpu_check-<host>.json``).
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
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TINY = ["measure.warmup_steps=3", "measure.steps=10"]


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
    """None when mpirun and Horovod's PyTorch integration are usable, else why not."""
    if shutil.which("mpirun") is None:
        return "no mpirun on PATH"
    r = subprocess.run([sys.executable, "-c", "import horovod.torch"], capture_output=True)
    return None if r.returncode == 0 else "horovod.torch does not import"


def run_demo(impl: str, np: int, sets: list[str]) -> dict[str, Any]:
    """One ``hvdscale run`` of the demo on the GPU; returns its record."""
    out = tempfile.mkdtemp(prefix="gpu_check-")
    args = [sys.executable, "-m", "hvdscale", "run", "configs/demo.yaml", "--out", out]
    for s in ["device=cuda", f"model.rnn_impl={impl}", *TINY, *sets]:
        args += ["--set", s]
    if np > 1:
        args = ["mpirun", "-np", str(np), "--oversubscribe", *args]
    r = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        fail(f"{impl} np={np} failed:\n{r.stderr[-3000:]}")
    lines = (Path(out) / "results.jsonl").read_text().splitlines()
    return json.loads(lines[-1])


def _adapter(impl: str) -> Any:
    from hvdscale.config import load_config
    from hvdscale.core.batching import BatchPlan, per_rank_batch_size
    from hvdscale.core.device import resolve_device
    from hvdscale.corpora.corpus import load_corpus
    from hvdscale.frameworks.torch import TorchAdapter

    cfg = load_config(str(ROOT / "configs/demo.yaml"), [f"model.rnn_impl={impl}"])
    placement = resolve_device("cuda", 1, 0, 1)
    m = cfg.model
    adapter = TorchAdapter(m, cfg.optim, m.src_vocab, m.tgt_vocab, placement)
    corpus = load_corpus(cfg.data, m.kind, m.src_vocab, m.tgt_vocab, 0, 1)
    plan = BatchPlan(corpus, cfg.data, m.kind, per_rank_batch_size(cfg.data, 0, 1), 0)
    return adapter, plan.batches()


def kernel_names(impl: str) -> list[str]:
    """CUDA kernel names of one training step of the demo model, from torch.profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    adapter, batches = _adapter(impl)
    batch = next(batches)
    adapter.zero_grad()
    adapter.forward_backward(batch, 1.0)  # warm-up: cuDNN plans, allocator
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        adapter.zero_grad()
        adapter.forward_backward(batch, 1.0)
        adapter.step()
        torch.cuda.synchronize()
    return sorted({e.key for e in prof.key_averages()})


def is_cudnn_rnn(name: str) -> bool:
    """cuDNN's RNN kernels: named after cudnn, or its RNN/LSTM persistent/elementwise kernels."""
    low = name.lower()
    return "cudnn" in low or "rnn_" in low or "lstm_elementwise" in low


def timing(impl: str, steps: int = 20) -> dict[str, Any]:
    """words/s of the same steps with and without a device synchronisation before the clock."""
    import torch

    adapter, batches = _adapter(impl)
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
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for t in tensors[3:]:
            opt.zero_grad(set_to_none=False)
            loss, _ = model(**t)  # never .item(): that would synchronise
            loss.backward()
            opt.step()
        if sync:
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        torch.cuda.synchronize()
        return dt

    pairs = [(run(False), run(True)) for _ in range(3)]  # interleaved, paired
    unsync = sorted(p[0] for p in pairs)[1]
    synced = sorted(p[1] for p in pairs)[1]
    return {"steps": steps, "words": words, "unsynced_s": unsync, "synced_s": synced,
            "words_per_s_unsynced": words / unsync, "words_per_s_synced": words / synced,
            "pairs_s": pairs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="", help="JSON path (default bench/results/"
                    "gpu_check-<host>.json)")
    args = ap.parse_args()
    torch = need_gpu()
    sys.path.insert(0, str(ROOT))
    from hvdscale.core.device import resolve_device
    from hvdscale.frameworks.torch import gpu_provenance
    from hvdscale.records.provenance import versions

    result: dict[str, Any] = {"host": socket.gethostname(), "loadavg": os.getloadavg(),
                              "versions": versions(),
                              "gpu": gpu_provenance(resolve_device("cuda", 1, 0, 1)),
                              "runs": [], "checks": {}}
    why_not = can_run_np2()
    nps = [1] if why_not else [1, 2]
    result["np2_skipped_because"] = why_not
    if why_not:
        print(f"gpu_check: np=1 only: {why_not}", flush=True)
    for np in nps:
        for impl in ("fused", "loop"):
            rec = run_demo(impl, np, [])
            result["runs"].append({"np": np, "rnn_impl": impl, "words_per_s": rec["words_per_s"],
                                   "step_time_median_s": rec["step_time"]["median"],
                                   "device": rec["device"],
                                   "gpu_operations": rec["strategy"].get("gpu_operations"),
                                   "memory": rec["memory"]})
            print(f"gpu_check: demo {impl} np={np}: {rec['words_per_s']:.0f} words/s", flush=True)
            if rec["device"]["per_rank"][0]["kind"] != "cuda":
                fail(f"{impl} np={np} did not run on the GPU: {rec['device']}")
    fused_k, loop_k = kernel_names("fused"), kernel_names("loop")
    fused_cudnn = [k for k in fused_k if is_cudnn_rnn(k)]
    loop_cudnn = [k for k in loop_k if is_cudnn_rnn(k)]
    result["checks"]["cudnn"] = {"fused_cudnn_kernels": fused_cudnn,
                                 "loop_cudnn_kernels": loop_cudnn,
                                 "fused_all_kernels": fused_k, "loop_all_kernels": loop_k,
                                 "ok": bool(fused_cudnn) and not loop_cudnn}
    for impl in ("fused", "loop"):
        t = timing(impl)
        # Without a sync the clock stops while kernels are still queued: never slower.
        t["ok"] = t["words_per_s_unsynced"] >= t["words_per_s_synced"] * 0.98
        result["checks"][f"sync_{impl}"] = t
    out = args.out or str(ROOT / "bench/results" / f"gpu_check-{socket.gethostname()}.json")
    Path(out).write_text(json.dumps(result, indent=1))
    bad = [k for k, v in result["checks"].items() if not v["ok"]]
    print(f"gpu_check: wrote {out}; torch {torch.__version__}, GPU {result['gpu']}")
    if bad:
        fail(f"checks failed: {', '.join(bad)} (details in {out})")
    print("gpu_check: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
