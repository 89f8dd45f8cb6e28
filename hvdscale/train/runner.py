"""One run on every rank: set up, warm up, measure, gather, and (rank 0) write the record.

Every rank runs this same function. The order matters: threads and Horovod settings take effect
before the libraries that read them start; the results directory is proven writable before any
training; timings are gathered only after the timed window.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import resource
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hvdscale.config import RunConfig, StrategyConfig, check_launch, to_dict
from hvdscale.core.device import Placement
from hvdscale.core.faults import maybe_fault
from hvdscale.core.meter import StepMeter, summarize
from hvdscale.core.progress import ProgressReport
from hvdscale.core.supervise import StepWatchdog, phase, start_deadline, stop_deadline
from hvdscale.core.threads import launch_local_size, resolve_threads, thread_env
from hvdscale.core.world import (
    World,
    hostname,
    init_horovod,
    is_gloo_launch,
    launch_rank,
    make_world,
)
from hvdscale.errors import HvdscaleError
from hvdscale.frameworks.base import Framework
from hvdscale.records.store import append_record, check_writable, record_key


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _current_rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return float("nan")


def check_world(cfg: RunConfig, world: World) -> None:
    """Reject configs this launch cannot run, identically on every rank."""
    check_launch(cfg, world.size, world.backend == "mpi")


def run(cfg: RunConfig, out_dir: str | Path, argv: list[str] | None = None,
        progress: ProgressReport | None = None) -> dict[str, Any] | None:
    """Run ``cfg`` on this rank; rank 0 returns the record it wrote, other ranks None.

    ``progress`` is told each step and phase (rank 0's live line or plain lines; see
    hvdscale.core.progress); the caller closes it.
    """
    started = datetime.now(UTC).isoformat(timespec="seconds")
    start_deadline(cfg.measure.run_deadline_s(), launch_rank())
    try:
        return _run(cfg, out_dir, argv, started, progress or ProgressReport())
    finally:
        stop_deadline()


def _run(cfg: RunConfig, out_dir: str | Path, argv: list[str] | None, started: str,
         progress: ProgressReport) -> dict[str, Any] | None:
    maybe_fault(launch_rank(), "config")

    local_size = launch_local_size()
    intra, inter = resolve_threads(cfg.threads.intra_op, cfg.threads.inter_op, local_size)
    env = thread_env(intra, cfg.threads.mpi_yield, local_size)
    # A value the user exported explicitly wins over auto.
    for k, v in env.items():
        if k != "OMPI_MCA_mpi_yield_when_idle" or cfg.threads.mpi_yield != "auto":
            os.environ[k] = v
        else:
            os.environ.setdefault(k, v)

    # The framework loads (and sizes its thread pools) before Horovod starts: TensorFlow's
    # pools are fixed by its first op, and Horovod's collectives run ops.
    from hvdscale.frameworks import load_framework

    fw = load_framework(cfg.framework)
    fw.set_threads(intra, inter)
    # The device, before Horovod and before TensorFlow's runtime start: device=cuda without a
    # GPU fails here, identically on every rank, before anything is trained or recorded.
    from hvdscale.core.device import launch_local_rank, resolve_device

    placement = resolve_device(cfg.device, fw.gpu_count(), launch_local_rank(), local_size)
    fw.use_device(placement)

    use_hvd = cfg.strategy.name == "horovod" or is_gloo_launch()
    hvd_env: dict[str, str] = {}
    hvd_cfg = cfg.strategy.horovod
    if use_hvd:
        from hvdscale.strategies.horovod import horovod_env, resolve_outputs

        affinity = hvd_cfg.thread_affinity
        if affinity and len(affinity) < local_size:
            raise HvdscaleError(f"strategy.horovod.thread_affinity lists {len(affinity)} cores "
                                f"but {local_size} ranks run on this host: give one per rank")
        run_id = f"{cfg.name}-{started.replace(':', '').replace('+0000', '')}-{os.getpid()}"
        hvd_cfg = resolve_outputs(hvd_cfg, out_dir, run_id)
        hvd_env = horovod_env(hvd_cfg, hvd_cfg.timeline, hvd_cfg.autotune_log)
        # hvd: settings exported first, read once at init; the framework's own integration
        init_horovod(hvd_env, cfg.framework)
    world = make_world(use_hvd, cfg.framework)
    check_world(cfg, world)
    if world.rank == 0:
        check_writable(out_dir)
    phase("barrier: results directory checked", waiting=True)
    world.barrier()  # no rank trains unless rank 0 can write the record
    hvd_used = None
    if use_hvd:
        from hvdscale.strategies.horovod import horovod_env_now, in_force

        # What each rank's Horovod read at init (its own environment), and what follows from it.
        envs = world.allgather(horovod_env_now())
        hvd_used = {"env_per_rank": envs,
                    "in_force_per_rank": [in_force(e, world.local_size, world.cross_size)
                                          for e in envs]}
        hvd_used["same_on_every_rank"] = all(f == hvd_used["in_force_per_rank"][0]
                                             for f in hvd_used["in_force_per_rank"])
    strategy_cfg = dataclasses.replace(cfg.strategy, horovod=hvd_cfg)
    return _train(cfg, strategy_cfg, world, fw, out_dir, started, intra, inter,
                  {"env": hvd_env, "used": hvd_used}, argv, progress, placement)


def _train(cfg: RunConfig, strategy_cfg: StrategyConfig, world: World, fw: Framework,
           out_dir: str | Path, started: str, intra: int, inter: int, hvd: dict[str, Any],
           argv: list[str] | None, progress: ProgressReport,
           placement: Placement) -> dict[str, Any] | None:
    from hvdscale.core.batching.schedule import make_schedule
    from hvdscale.core.data import load_corpus, make_plan
    from hvdscale.strategies import make_strategy

    rank, size = world.rank, world.size
    strategy = make_strategy(strategy_cfg, cfg.framework, world)

    phase("data")
    maybe_fault(rank, "data")
    # Data is sharded over the ranks that compute (serve-only ranks read shard 0 just for the
    # vocabulary), so a dedicated server's job trains on the same data as colocated ones.
    widx = getattr(strategy, "worker_index", rank)
    nworkers = getattr(strategy, "num_workers", size)
    corpus = load_corpus(cfg.data, cfg.model.kind, cfg.model.src_vocab, cfg.model.tgt_vocab,
                         widx, nworkers)
    src_vocab, tgt_vocab = _vocab_sizes(cfg, corpus)
    plan = None
    if strategy.computes:
        plan = make_plan(corpus, cfg.data, cfg.model.kind, widx, nworkers)

    phase("model")
    maybe_fault(rank, "model")
    adapter = fw.make_adapter(cfg.model, cfg.optim, src_vocab, tgt_vocab, placement)
    phase("strategy set-up (initial parameters shared)", waiting=True)
    strategy.setup(adapter)

    # Epoch mode: every rank agrees on the step count here; ranks out of batches get None.
    phase("schedule agreement", waiting=True)
    schedule, batches = make_schedule(cfg.measure, plan, world, mode=cfg.data.bucketing.mode)
    meter = StepMeter(schedule.warmup_steps)
    progress.begin(schedule.warmup_steps, schedule.steps, schedule.epochs, meter)
    watchdog = StepWatchdog(cfg.measure.step_timeout_s, rank, lambda: strategy.phase)
    rss_first = None
    last_loss = 0.0

    def run_step(step: int, batch: Any) -> tuple[Any, float, float]:
        strategy.before_step(step)
        watchdog.start_step(step)
        meter.start_step()
        maybe_fault(rank, f"step:{step}")
        computed = adapter.compute_s
        loss = strategy.step(batch)
        computed = adapter.compute_s - computed
        adapter.synchronize()  # the step time includes the step's queued device work
        return batch, loss, computed

    # Traced steps (Horovod's timeline) run after the measured window with fixed step counts,
    # on the window's last batches again, so tracing never slows a step that is timed.
    traced = strategy.trace_plan(schedule.steps, endless=schedule.epochs == 0)
    recent: collections.deque = collections.deque(maxlen=max(1, traced))
    phase("training steps")
    for step in range(-schedule.warmup_steps, schedule.steps):
        if step == 0:
            adapter.synchronize()  # warm-up work still queued on a GPU stays out of the window
            world.barrier()
            meter.open_window()
        batch, last_loss, computed = run_step(step, next(batches))
        recent.append(batch)
        if batch is not None:
            meter.end_step(step, batch.words, batch.loss_tokens, batch.padded_tokens,
                           batch.sentences, last_loss, compute_s=computed)
        else:
            meter.end_step(step, 0, 0, 0, 0, 0.0, idle=strategy.computes)
        watchdog.end_step()
        progress.step(step)
        if step == 0:
            rss_first = _current_rss_mb()
    adapter.synchronize()
    phase("barrier: end of the timed window", waiting=True)
    world.barrier()
    meter.close_window()
    fingerprint = adapter.fingerprint() if strategy.computes else None
    last_tokens = batch.loss_tokens if batch is not None else 0
    for step in range(schedule.steps, schedule.steps + traced):
        run_step(step, recent[(step - schedule.steps) % len(recent)])
        watchdog.end_step()
    strategy.before_step(schedule.steps + traced)
    progress.phase("gather")
    watchdog.stop()
    strategy.finish()

    mine = meter.rank_summary()
    mine.update(rank=rank, host=hostname(), computes=strategy.computes,
                peak_rss_mb=_rss_mb(), rss_first_mb=rss_first, rss_last_mb=_current_rss_mb(),
                fingerprint=fingerprint, last_loss=last_loss, last_tokens=last_tokens,
                padding_profile=plan.padding_profile() if plan is not None else None,
                device=adapter.device_stats(),
                gpu=fw.gpu_provenance(placement) if rank == 0 else None)
    phase("gather of the ranks' timings", waiting=True)
    gathered = world.allgather(mine)
    maybe_fault(rank, "results")
    # Every rank must reach this point before the record is written: a failure anywhere up
    # to here leaves no record of a run that did not complete.
    phase("barrier: before the record", waiting=True)
    world.barrier()
    if rank != 0:
        return None
    record = _record(cfg, world, strategy, adapter, gathered, started, intra, inter, hvd, argv,
                     corpus.truncated, src_vocab, tgt_vocab, schedule)
    append_record(out_dir, record)
    return record


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


def _vocab_sizes(cfg: RunConfig, corpus: Any) -> tuple[int, int]:
    """Vocabulary sizes of the model: from config, or the data's when config says 0."""
    m = cfg.model
    if cfg.data.source != "text":
        return m.src_vocab, m.tgt_vocab or m.src_vocab
    pairs = [("model.src_vocab", m.src_vocab, corpus.src_vocab, "data.text.src")]
    if m.kind == "nmt":
        pairs.append(("model.tgt_vocab", m.tgt_vocab, corpus.tgt_vocab, "data.text.tgt"))
    for key, want, have, where in pairs:
        if want and want != have:
            raise HvdscaleError(f"{key}={want} does not match the vocabulary of {where} "
                                f"({have} tokens with specials); set {key}=0 to take it from "
                                "the data")
    return corpus.src_vocab, corpus.tgt_vocab


def _record(cfg: RunConfig, world: World, strategy: Any, adapter: Any, ranks: list[dict],
            started: str, intra: int, inter: int, hvd: dict[str, Any],
            argv: list[str] | None, truncated: int, src_vocab: int, tgt_vocab: int,
            schedule: Any) -> dict:
    from hvdscale.records.provenance import git_revision, versions

    compute = [r["rank"] for r in ranks if r["computes"]]
    summary = summarize(ranks, compute, strategy.synchronous)
    final_tokens = sum(r["last_tokens"] for r in ranks)
    return {
        "schema": 1,
        "status": "ok",
        "name": cfg.name,
        "started": started,
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "argv": argv or sys.argv,
        "config": to_dict(cfg),
        "key": record_key(cfg),
        "ranks": world.size,
        "workers": len(compute),
        "hosts": sorted({r["host"] for r in ranks}),
        "rank_hosts": [r["host"] for r in ranks],
        "launcher_backend": world.backend,
        "threads": {"intra_op": intra, "inter_op": inter,
                    "mpi_yield_when_idle": os.environ.get("OMPI_MCA_mpi_yield_when_idle")},
        "horovod_env": hvd["env"],
        "horovod_used": hvd["used"],
        "loadavg": list(os.getloadavg()),
        "versions": versions(),
        "git": git_revision(),
        "strategy": strategy.info(),
        "model_params": adapter.num_params,
        "vocab": {"src": src_vocab, "tgt": tgt_vocab},
        "truncated_sentences_rank0": truncated,
        "measure": {"warmup_steps": schedule.warmup_steps, "steps": schedule.steps,
                    "epochs": schedule.epochs, "aligned_buckets": schedule.aligned,
                    "bucketing_mode": schedule.mode,
                    "batches_per_rank": list(schedule.batches_per_rank)},
        "padding": padding_summary([r["padding_profile"] for r in ranks if r["computes"]],
                                   summary["words"], summary["padded_tokens"],
                                   cfg.model.rnn_impl),
        "final_loss": (sum(r["last_loss"] for r in ranks) / final_tokens
                       if final_tokens else None),
        "fingerprints": [r["fingerprint"] for r in ranks],
        "memory": [{"rank": r["rank"], "peak_rss_mb": r["peak_rss_mb"],
                    "rss_first_mb": r["rss_first_mb"], "rss_last_mb": r["rss_last_mb"],
                    "peak_gpu_mem_mb": r["device"]["peak_gpu_mem_mb"]}
                   for r in ranks],
        "device": {"requested": cfg.device, "gpu": ranks[0]["gpu"],
                   "per_rank": [{"rank": r["rank"], **r["device"]} for r in ranks]},
        "per_rank": [{"rank": r["rank"], "words": r["words"], "window_s": r["window_s"],
                      "step_time_median": float(sorted(r["step_times"])[len(r["step_times"])//2])
                      if r["step_times"] else None}
                     for r in ranks],
        **summary,
    }
