"""The run's record: what each rank contributes (gathered to rank 0) and the record rank 0
writes from them, with the padding figures it carries."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from typing import Any

from hvdscale.config import to_dict
from hvdscale.core.batching import Schedule
from hvdscale.core.meter import summarize
from hvdscale.core.threads import cores_on_host
from hvdscale.core.world import hostname
from hvdscale.records.run import RunRecord
from hvdscale.records.store import record_key
from hvdscale.strategies.base import Adapter, Strategy
from hvdscale.train.context import RunContext
from hvdscale.train.loop import LoopResult
from hvdscale.train.memory import current_rss_mb, peak_rss_mb
from hvdscale.train.rank_data import RunData


def rank_entry(ctx: RunContext, strategy: Strategy, adapter: Adapter, data: RunData,
               done: LoopResult) -> dict[str, Any]:
    """This rank's timings, memory, fingerprint and device facts, for the gather."""
    rank = ctx.world.rank
    mine = done.meter.rank_summary()
    mine.update(rank=rank, host=hostname(), computes=strategy.computes,
                peak_rss_mb=peak_rss_mb(), rss_first_mb=done.rss_first_mb,
                rss_last_mb=current_rss_mb(), fingerprint=done.fingerprint,
                last_loss=done.last_loss, last_tokens=done.last_tokens,
                padding_profile=data.plan.padding_profile() if data.plan is not None else None,
                device=adapter.device_stats(), compile=done.compile,
                precision=_precision_info(adapter),
                gpu=ctx.fw.gpu_provenance(ctx.placement) if rank == 0 else None)
    return mine


def _threads(ctx: RunContext) -> dict[str, Any]:
    """The run's thread counts and the Open MPI settings in force (core/threads.py)."""
    return {"intra_op": ctx.intra, "inter_op": ctx.inter,
            "mpi_yield_when_idle": os.environ.get("OMPI_MCA_mpi_yield_when_idle"),
            "mpi_btl": os.environ.get("OMPI_MCA_btl"), "cores": cores_on_host()}


def build_record(ctx: RunContext, strategy: Strategy, adapter: Adapter, data: RunData,
                 schedule: Schedule, ranks: list[dict], steps_run: int | None = None
                 ) -> RunRecord:
    """The record of a completed run (rank 0), from every rank's ``rank_entry`` in rank order:
    each part from its one writer (``RunRecord.assemble`` refuses a field set twice).
    ``steps_run``: the steps measured when a target ended the run (None: the schedule's)."""
    compute = [r["rank"] for r in ranks if r["computes"]]
    window = summarize(ranks, compute, strategy.synchronous)
    return RunRecord.assemble({
        "train/record.py _identity": _identity(ctx),
        "train/record.py _run_facts": _run_facts(ctx, strategy, adapter, data, schedule,
                                                 steps_run),
        "train/record.py _per_rank": _per_rank(ctx, ranks, window),
        "core/meter.py summarize": window,
    })


def _identity(ctx: RunContext) -> dict[str, Any]:
    """What was run, where, when and with what software."""
    from hvdscale.records.provenance import git_revision, versions

    cfg = ctx.cfg
    return {
        "status": "ok", "name": cfg.name, "started": ctx.started,
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "argv": ctx.argv or sys.argv, "config": to_dict(cfg), "key": record_key(cfg),
        "ranks": ctx.world.size, "launcher_backend": ctx.world.backend,
        "threads": _threads(ctx), "horovod_env": ctx.horovod["env"],
        "horovod_used": ctx.horovod["used"],
        "loadavg": list(os.getloadavg()),  # other jobs on these cores change every timing
        # The host's cores beside its load: hvdscale.records.load tells a busy host from both.
        "host_cores": os.cpu_count(), "versions": versions(), "git": git_revision(),
    }


def _run_facts(ctx: RunContext, strategy: Strategy, adapter: Adapter, data: RunData,
               schedule: Schedule, steps_run: int | None) -> dict[str, Any]:
    """The strategy's, model's, data's and schedule's facts."""
    return {
        "strategy": strategy.info(), "model_params": adapter.num_params,
        "vocab": {"src": data.src_vocab, "tgt": data.tgt_vocab},
        "truncated_sentences_rank0": data.corpus.truncated,
        "measure": {"warmup_steps": schedule.warmup_steps,
                    "steps": schedule.steps if steps_run is None else steps_run,
                    "epochs": schedule.epochs, "aligned_buckets": schedule.aligned,
                    "bucketing_mode": schedule.mode,
                    "batches_per_rank": list(schedule.batches_per_rank)},
    }


def _per_rank(ctx: RunContext, ranks: list[dict], window: dict[str, Any]) -> dict[str, Any]:
    """What the ranks sent: hosts, memory, devices, fingerprints, padding, last loss."""
    cfg = ctx.cfg
    final_tokens = sum(r["last_tokens"] for r in ranks)
    return {
        "workers": sum(1 for r in ranks if r["computes"]),
        "hosts": sorted({r["host"] for r in ranks}),
        "rank_hosts": [r["host"] for r in ranks],
        "padding": padding_summary([r["padding_profile"] for r in ranks if r["computes"]],
                                   window["words"], window["padded_tokens"],
                                   cfg.model.rnn_impl),
        "final_loss": (sum(r["last_loss"] for r in ranks) / final_tokens
                       if final_tokens else None),
        "fingerprints": [r["fingerprint"] for r in ranks],
        **_compute_fields(cfg.strategy, ranks),
        "memory": [{"rank": r["rank"], "peak_rss_mb": r["peak_rss_mb"],
                    "rss_first_mb": r["rss_first_mb"], "rss_last_mb": r["rss_last_mb"],
                    "peak_gpu_mem_mb": r["device"]["peak_gpu_mem_mb"]} for r in ranks],
        "device": {"requested": cfg.device, "gpu": ranks[0]["gpu"],
                   "shared_gpus": ctx.gpu_groups,
                   "per_rank": [{"rank": r["rank"], **r["device"]} for r in ranks]},
        "per_rank": [{"rank": r["rank"], "words": r["words"], "window_s": r["window_s"],
                      "step_time_median": _median(r["step_times"])} for r in ranks],
    }


def _median(xs: list[float]) -> float | None:
    return float(sorted(xs)[len(xs) // 2]) if xs else None


def _precision_info(adapter: Adapter) -> dict[str, Any]:
    """What the adapter computed in (fp32 throughout for an adapter that has no other mode)."""
    info = getattr(adapter, "precision_info", None)
    if info is not None:
        return info()
    return {"compute": "fp32", "master_weights": "fp32", "grads": "float32", "loss_scaler": None}


def _compute_fields(strategy: Any, ranks: list[dict]) -> dict[str, Any]:
    """The record's ``precision`` (rank 0's, with the strategy's wire dtype) and ``compile``."""
    return {"precision": {**ranks[0]["precision"], "wire": wire_dtype(to_dict(strategy))},
            "compile": compile_summary([r["compile"] for r in ranks])}


def wire_dtype(strategy: dict[str, Any]) -> str:
    """The dtype the strategy sends gradients in (its own choice, whatever ``precision`` is):
    Horovod's ``compression``, DDP's ``comm_hook``; fp32 otherwise."""
    name = strategy.get("name")
    if name == "horovod" and (strategy.get("horovod") or {}).get("compression") == "fp16":
        return "fp16"
    hook = (strategy.get("ddp") or {}).get("comm_hook", "none") if name == "ddp" else "none"
    if hook in ("fp16", "bf16"):
        return hook
    if hook == "powersgd":
        return "fp32 (PowerSGD low-rank factors)"
    return "none (independent replicas)" if name == "independent" else "fp32"


def compile_summary(per_rank: list[dict[str, float] | None]) -> dict[str, Any] | None:
    """The compile pass across ranks (None without a compiled loop): the slowest rank's
    seconds, which is what the job waited for, and every rank's."""
    timed = [c for c in per_rank if c]
    if not timed:
        return None
    return {"compile_s": max(c["compile_s"] for c in timed),
            "first_pass_s": max(c["first_pass_s"] for c in timed),
            "compiled_pass_s": max(c["compiled_pass_s"] for c in timed),
            "per_rank_compile_s": [c["compile_s"] if c else None for c in per_rank]}


def padding_summary(profiles: list[dict], words: int, slots: int, rnn_impl: str = "loop") -> dict:
    """Real tokens vs padded token slots: the measured window, and one epoch of every
    computing rank's data batched as configured, without bucketing, and padded to the max.

    Next to the padding ratio (slots / real tokens) each entry has the RNN's work ratio (its
    work slots / real tokens; see ``rnn_work_slots``): the ratio bucketing can save the
    recurrence of this implementation."""
    def entry(w: int, n: int) -> dict[str, Any]:
        work = rnn_work_slots(rnn_impl, w, n)
        return {"words": w, "slots": n, "padded_fraction": 1.0 - w / n if n else 0.0,
                "padding_ratio": n / w if w else None, "rnn_work_slots": work,
                "work_ratio": work / w if w else None}

    out: dict[str, Any] = {"window": entry(words, slots), "rnn_impl": rnn_impl}
    for name in ("configured", "unbucketed", "pad_to_max"):
        out[f"epoch_{name}"] = entry(sum(p[name]["words"] for p in profiles),
                                     sum(p[name]["slots"] for p in profiles))
    return out


def rnn_work_slots(rnn_impl: str, words: int, slots: int) -> int:
    """Token slots the recurrence really runs: the sum over the time steps it runs of the
    sequences it steps. ``loop`` steps every row of the padded batch through every time step:
    all the padded slots. ``fused`` runs packed sequences, stepping at time t only the
    sequences still alive: the sum of the input lengths, which is the real tokens (``words``
    counts the lm's inputs, the nmt encoder's source and the decoder's BOS-prefixed target).
    The embedding, the output projection and the loss still run on every padded slot."""
    return words if rnn_impl == "fused" else slots
