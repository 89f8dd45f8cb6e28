"""One run on every rank: set up, warm up, measure, gather, and (rank 0) write the record.

Every rank runs this same function. The order matters: threads and Horovod settings take effect
before the libraries that read them start; the preflight (hvdscale.train.preflight) refuses
whatever the world cannot run, the results directory included, once the world is made and
before any training; timings are gathered only after the timed window.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hvdscale.config import RunConfig, StrategyConfig, ThreadsConfig
from hvdscale.config.run import tf32_in_force
from hvdscale.core import startup
from hvdscale.core.faults import maybe_fault
from hvdscale.core.peers import start_peers
from hvdscale.core.progress import ProgressReport
from hvdscale.core.supervise import current_state, phase, start_deadline, stop_deadline
from hvdscale.core.threads import export_threads, launch_local_size, single_host_mpi_env
from hvdscale.core.world import World, launch_kind, launch_rank, make_world
from hvdscale.records.run import RunRecord
from hvdscale.records.startup import summarize_startup
from hvdscale.records.store import append_record
from hvdscale.train.blocks import MAX_BLOCKS, BlockMeter
from hvdscale.train.context import RunContext
from hvdscale.train.loop import LoopParts, train_loop
from hvdscale.train.lr import scaled_optim
from hvdscale.train.preflight import preflight, refuse_launch
from hvdscale.train.rank_data import load_data
from hvdscale.train.record import build_record, rank_entry
from hvdscale.train.shapes import check_same_shapes
from hvdscale.train.teardown import close_strategies
from hvdscale.train.until import make_tracker


@dataclass(frozen=True)
class LaunchParts:
    """What a launch sets up once for all its points: threads, the framework on its device, MPI.

    A shared launch (``hvdscale run-points``) runs every point on these; the points it holds
    agree on what they fix (``hvdscale.study.sweep.groups.share_key``)."""

    fw: Any
    placement: Any
    intra: int
    inter: int
    local_size: int


def prepare_launch(threads: ThreadsConfig, framework: str, device: str) -> LaunchParts:
    """Threads, framework, device and MPI for a launch (start-up phases imports, mpi): what
    its points share (``hvdscale.study.sweep.groups.share_key``)."""
    local_size = launch_local_size()
    intra, inter = export_threads(threads.intra_op, threads.inter_op, threads.mpi_yield,
                                  local_size)
    os.environ.update(single_host_mpi_env())
    # The framework loads (and sizes its thread pools) before Horovod starts: TensorFlow's
    # pools are fixed by its first op, and Horovod's collectives run ops.
    from hvdscale.frameworks import load_framework

    fw = load_framework(framework)
    fw.set_threads(intra, inter)
    # The device, before Horovod and before TensorFlow's runtime start: device=cuda without a
    # GPU fails here, identically on every rank, before anything is trained or recorded.
    from hvdscale.core.device import launch_local_rank, resolve_device

    # device=cpu asks nothing of CUDA: counting GPUs would start its driver (seconds on a GPU host)
    gpus = 0 if device == "cpu" else fw.gpu_count()
    placement = resolve_device(device, gpus, launch_local_rank(), local_size)
    fw.use_device(placement)
    preload = getattr(fw, "preload", None)  # a framework's once-per-process first-use work
    if preload is not None:
        preload()
    startup.mark("imports")
    startup.init_mpi()
    startup.mark("mpi")
    return LaunchParts(fw, placement, intra, inter, local_size)


@dataclass
class PointRun:
    """One point's run within a launch: its command line, start, place in the launch, and what
    it set up (``hvdscale.train.teardown`` releases that for the next point of a shared
    launch)."""

    argv: list[str] | None
    started: str
    launch: dict[str, Any] | None = None
    """The record's ``launch`` (id, position, what ran before); None: a launch of its own."""
    held: list[tuple[str, Any]] = field(default_factory=list)
    """What this point set up, in order: Horovod, its world, side channel, strategy."""


def run(cfg: RunConfig, out_dir: str | Path, argv: list[str] | None = None,
        progress: ProgressReport | None = None) -> RunRecord | None:
    """Run ``cfg`` on this rank; rank 0 returns the record it wrote, other ranks None.

    ``progress`` is told each step and phase (rank 0's live line or plain lines; see
    hvdscale.core.progress); the caller closes it.
    """
    started = datetime.now(UTC).isoformat(timespec="seconds")
    startup.begin()  # each phase below ends with a startup.mark (hvdscale.core.startup)
    start_deadline(cfg.measure.run_deadline_s(), launch_rank())
    try:
        maybe_fault(launch_rank(), "config")
        refuse_launch(cfg)  # before the framework loads: seconds, for a refusal
        launch = prepare_launch(cfg.threads, cfg.framework, cfg.device)
        point = PointRun(argv, started)
        record = run_prepared(launch, cfg, out_dir, point, progress or ProgressReport())
        # The strategy goes first, in its own order: dropped with the rest, DDP's reducer would
        # free its gloo group under the GIL and can deadlock (hvdscale.train.teardown).
        close_strategies(point.held)
        return record
    finally:
        stop_deadline()


def run_prepared(launch: LaunchParts, cfg: RunConfig, out_dir: str | Path, point: PointRun,
                 progress: ProgressReport) -> RunRecord | None:
    """Horovod, world and the preflight for ``cfg`` on a prepared launch; then ``_train``, and
    rank 0 writes the record it returns."""
    fw = launch.fw
    # Under horovodrun --gloo Horovod is the only channel, whatever the strategy: the world is
    # made over it, and the preflight refuses the strategies that need MPI. Under torchrun
    # Horovod never starts (nothing launched it): the preflight refuses the strategy instead.
    kind = launch_kind()
    use_hvd = kind == "gloo" or (cfg.strategy.name == "horovod" and kind == "mpi")
    hvd_env: dict[str, str] = {}
    hvd_cfg = cfg.strategy.horovod
    if use_hvd:
        from hvdscale.strategies.horovod import horovod_env_now, start_horovod

        run_id = f"{cfg.name}-{point.started.replace(':', '').replace('+0000', '')}-{os.getpid()}"
        # Its teardown shuts Horovod down and puts back the HOROVOD_* settings found here.
        point.held.append(("horovod", (fw.HOROVOD.module, horovod_env_now())))
        # hvd: settings exported first, read once at init; the framework's own integration
        hvd_cfg, hvd_env = start_horovod(hvd_cfg, fw.HOROVOD.module, out_dir, run_id,
                                         launch.local_size)
    # A point of a shared launch talks on a communicator of its own, freed at its teardown:
    # nothing a failed point left unreceived can match the next point's receives.
    world = make_world(use_hvd, fw.HOROVOD, own_comm=point.launch is not None)
    point.held.append(("world", world))
    # Every refusal at once, and no rank trains unless rank 0 can write the record.
    gpu_groups = preflight(cfg, out_dir, world, launch.placement,
                           fw.HOROVOD.module if use_hvd else None)
    startup.mark("horovod")
    # Each rank answers where it is over a side channel, so a rank that waits too long in a
    # collective can name the rank it waits for (hvdscale.core.peers).
    phase("exchange of the side channel's addresses", waiting=True)
    point.held.append(("peers", start_peers(world.rank, world.allgather, current_state)))
    hvd_used = None
    if use_hvd:
        from hvdscale.strategies.horovod import horovod_in_force

        # What each rank's Horovod read at init (its own environment), and what follows from it.
        hvd_used = horovod_in_force(world)
    strategy_cfg = dataclasses.replace(cfg.strategy, horovod=hvd_cfg)
    startup.mark("side_channel")
    ctx = RunContext(cfg, world, fw, launch.placement, launch.intra, launch.inter,
                     point.started, point.argv, {"env": hvd_env, "used": hvd_used}, gpu_groups)
    record = _train(ctx, strategy_cfg, progress, point)
    if record is not None:
        append_record(out_dir, record)
    return record


def _train(ctx: RunContext, strategy_cfg: StrategyConfig, progress: ProgressReport,
           point: PointRun) -> RunRecord | None:
    """Data, model, strategy, schedule, the step loop and the gather; rank 0 returns the
    record, the other ranks None."""
    from hvdscale.strategies import make_strategy

    cfg, world, rank = ctx.cfg, ctx.world, ctx.world.rank
    strategy = make_strategy(strategy_cfg, world, ctx.fw.HorovodStrategy,
                             ctx.fw.make_native_strategy)
    point.held.append(("strategy", strategy))
    startup.mark("process_group")

    phase("data")
    maybe_fault(rank, "data")
    data = load_data(cfg, strategy, world)
    startup.mark("data")

    phase("model")
    maybe_fault(rank, "model")
    optim, optim_used = scaled_optim(cfg.optim, cfg.data.scaling,
                                     getattr(strategy, "num_workers", world.size))
    ctx.fw.set_tf32(tf32_in_force(cfg))  # this point's matmuls, before its model is made
    adapter = ctx.fw.make_adapter(cfg.model, optim, data.src_vocab, data.tgt_vocab,
                                  ctx.placement, precision=cfg.precision)
    check_same_shapes(cfg.model, adapter, world)
    phase("strategy set-up (initial parameters shared)", waiting=True)
    strategy.setup(adapter)

    schedule, batches, hooks = _plan_steps(cfg, world, adapter, strategy, data)
    startup.mark("model")
    clock = startup.clock()
    done = train_loop(LoopParts(strategy, adapter, world, cfg.measure.step_timeout_s, progress),
                      schedule, batches, on_step=lambda _: clock.once("first_step"),
                      stop_after=hooks.stop_after, on_open=hooks.on_open)
    strategy.finish()

    ranks = _gather(world, {**rank_entry(ctx, strategy, adapter, data, done),
                            "startup": clock.entry()})
    if rank != 0:
        return None
    record = build_record(ctx, strategy, adapter, data, schedule, ranks, hooks.steps_run)
    record.fill(startup=summarize_startup([r["startup"] for r in ranks]))
    hooks.complete(record, optim_used)
    if point.launch is not None:
        record.fill(launch=point.launch)
    return record


@dataclass
class _StopHooks:
    """What ends the measured steps early: a quality target (``measure.until``, evaluations)
    or a precision target (``measure.target_rel_ci``); neither: the schedule's step count."""

    tracker: Any = None
    blocks: BlockMeter | None = None

    @property
    def stop_after(self) -> Any:
        """The loop's ``stop_after`` (None: none)."""
        return self.tracker.after_step if self.tracker else (
            self.blocks.after_step if self.blocks else None)

    def on_open(self) -> None:
        """The measured window opened."""
        for h in (self.tracker, self.blocks):
            if h is not None:
                h.begin()

    @property
    def steps_run(self) -> int | None:
        """The measured steps when a target ended the run (not the cap); None: the schedule's."""
        if self.tracker is not None and self.tracker.measure.until.active:
            return self.tracker.steps
        return self.blocks.steps if self.blocks is not None else None

    def complete(self, record: RunRecord, optim_used: Any) -> None:
        """Rank 0: what the hooks add to the record."""
        if self.tracker is not None:
            record.fill(quality=self.tracker.summary(optim_used))
        if self.blocks is not None:
            record.fill(interval=self.blocks.summary())


def _plan_steps(cfg: RunConfig, world: World, adapter: Any, strategy: Any,
                data: Any) -> tuple[Any, Any, _StopHooks]:
    """The schedule every rank agreed on, its batches, and what may stop it early."""
    from hvdscale.core.batching import make_schedule

    # Epoch mode: every rank agrees on the step count here; ranks out of batches get None.
    phase("schedule agreement", waiting=True)
    measure = cfg.measure  # with a quality or precision target, the step count is only a cap
    if measure.until.active:
        measure = dataclasses.replace(measure, steps=measure.until.max_steps)
    elif measure.target_rel_ci:
        measure = dataclasses.replace(measure, steps=measure.block_steps * MAX_BLOCKS)
    schedule, batches = make_schedule(measure, data.plan, world, mode=cfg.data.bucketing.mode)
    tracker = make_tracker(cfg, world, adapter, strategy.computes,
                           (data.src_vocab, data.tgt_vocab), len(data.corpus.src))
    blocks = BlockMeter(cfg.measure, world) if cfg.measure.target_rel_ci else None
    return schedule, batches, _StopHooks(tracker, blocks)


def _gather(world: World, mine: dict[str, Any]) -> list[dict[str, Any]]:
    """Every rank's entry in rank order, once every rank has come to the end of its run."""
    phase("gather of the ranks' timings", waiting=True)
    gathered = world.allgather(mine)
    maybe_fault(world.rank, "results")
    # Every rank must reach this point before the record is written: a failure anywhere up
    # to here leaves no record of a run that did not complete.
    phase("barrier: before the record", waiting=True)
    world.barrier()
    return gathered
