"""The step loop of one run on a rank: warm-up, the measured window, and traced steps after it.

A plain function, not a closure inside the runner, so that the benchmarks
(bench/bench_overhead*.py) time exactly the loop a run executes as hvdscale's harness.
"""

from __future__ import annotations

import collections
import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hvdscale.core.batching import Schedule
from hvdscale.core.faults import maybe_fault
from hvdscale.core.meter import StepMeter
from hvdscale.core.progress import ProgressReport
from hvdscale.core.supervise import StepWatchdog, phase
from hvdscale.core.world import World
from hvdscale.corpora.corpus import Batch
from hvdscale.strategies.base import Adapter, Strategy
from hvdscale.train.memory import current_rss_mb


@dataclass(frozen=True)
class LoopParts:
    """What the loop drives on this rank."""

    strategy: Strategy
    adapter: Adapter
    world: World
    step_timeout_s: float
    """``measure.step_timeout_s``: the watchdog's limit on one step (0: no watchdog)."""
    progress: ProgressReport = field(default_factory=ProgressReport)
    """Told each step and phase (rank 0's report; the caller closes it)."""


@dataclass(frozen=True)
class LoopResult:
    """What the loop leaves for this rank's entry in the record."""

    meter: StepMeter
    rss_first_mb: float | None
    """Resident memory after the first measured step (None without measured steps)."""
    fingerprint: dict[str, float] | None
    """The parameters at the window's end (None on a rank that only serves)."""
    last_loss: float
    """Summed token loss of the last step (warm-up or measured)."""
    last_tokens: int
    """Loss tokens of that step's batch (0 without one)."""
    compile: dict[str, float] | None = None
    """``rnn_impl: compiled``: the compile pass's timings, before the warm-up (None else)."""


def train_loop(parts: LoopParts, schedule: Schedule, batches: Iterator[Batch | None],
               on_step: Callable[[int], None] | None = None,
               stop_after: Callable[[int, Batch | None], bool] | None = None,
               on_open: Callable[[], None] = lambda: None) -> LoopResult:
    """Run the schedule's warm-up and measured steps, then the strategy's traced steps.

    The window opens after the warm-up's device work has finished and every rank has met, and
    closes the same way. ``on_step(step)`` (optional) is called last in each warm-up and
    measured step: the benchmarks time whole iterations with it. ``stop_after(step, batch)``
    (optional; hvdscale.train.until) runs after each step, outside the window (its time is
    taken out), and ends the measured steps when it returns True on every rank; ``on_open()``
    right after the window opens."""
    strategy, adapter, world = parts.strategy, parts.adapter, parts.world
    compiled, batches = _precompile(parts, batches)
    meter = StepMeter(schedule.warmup_steps)
    parts.progress.begin(schedule.warmup_steps, schedule.steps, schedule.epochs, meter)
    watchdog = StepWatchdog(parts.step_timeout_s, world.rank, lambda: strategy.phase)
    # Traced steps (Horovod's timeline) run after the measured window with fixed step counts,
    # on the window's last batches again, so tracing never slows a step that is timed.
    traced = strategy.trace_plan(schedule.steps, endless=schedule.epochs == 0)
    recent: collections.deque = collections.deque(maxlen=max(1, traced))
    rss_first = None
    last_loss = 0.0
    batch = None
    phase("training steps")
    for step in range(-schedule.warmup_steps, schedule.steps):
        if step == 0:
            _open_window(parts, meter, on_open)
        batch = next(batches)
        last_loss, computed = _step(parts, watchdog, meter, step, batch)
        recent.append(batch)
        _meter_step(meter, step, batch, last_loss, computed, strategy.computes)
        watchdog.end_step()
        parts.progress.step(step)
        if step == 0:
            rss_first = current_rss_mb()
        if on_step is not None:
            on_step(step)
        # Warm-up too: its updates count toward a quality target.
        if stop_after is not None and _stop_here(stop_after, meter, step, batch):
            break
    _close_window(parts, meter)
    fingerprint = adapter.fingerprint() if strategy.computes else None
    last_tokens = batch.loss_tokens if batch is not None else 0
    _traced_steps(parts, watchdog, meter, schedule.steps, traced, recent)
    parts.progress.phase("gather")
    watchdog.stop()
    return LoopResult(meter, rss_first, fingerprint, last_loss, last_tokens, compiled)


def _open_window(parts: LoopParts, meter: StepMeter, on_open: Callable[[], None]) -> None:
    """Open the measured window once the warm-up's device work is done and every rank met."""
    parts.adapter.synchronize()  # warm-up work still queued on a GPU stays out of the window
    parts.world.barrier()
    meter.open_window()
    on_open()  # the tracker's clock starts with the window


def _stop_here(stop_after: Callable[[int, Batch | None], bool], meter: StepMeter, step: int,
               batch: Batch | None) -> bool:
    """Whether ``stop_after`` ends the measured steps after ``step``; the time it takes is
    taken out of the window."""
    paused = time.perf_counter()
    stop = stop_after(step, batch)
    meter.window_start += time.perf_counter() - paused  # evaluation is not training
    return stop


def _close_window(parts: LoopParts, meter: StepMeter) -> None:
    """Close the measured window once this rank's device work is done and every rank met."""
    parts.adapter.synchronize()
    phase("barrier: end of the timed window", waiting=True)
    parts.world.barrier()
    meter.close_window()


def _traced_steps(parts: LoopParts, watchdog: StepWatchdog, meter: StepMeter, first: int,
                  traced: int, recent: collections.deque) -> None:
    """The ``traced`` steps after the window (numbered from ``first``), on its last batches
    again, then the strategy told the step after them."""
    for step in range(first, first + traced):
        _step(parts, watchdog, meter, step, recent[(step - first) % len(recent)])
        watchdog.end_step()
    parts.strategy.before_step(first + traced)


def _precompile(parts: LoopParts,
                batches: Iterator[Batch | None]) -> tuple[dict | None, Iterator[Batch | None]]:
    """Compile a compiled loop on the first batch, before the warm-up, so its cost is measured
    apart and never lands in a warm-up or measured step (hvdscale.frameworks.torch.adapter's
    ``precompile``); the batch is then trained on as usual."""
    precompile = getattr(parts.adapter, "precompile", None)
    if precompile is None or not parts.strategy.computes:
        return None, batches
    phase("compiling the loop")
    parts.progress.phase("compiling the loop (timed apart from the warm-up)")
    first = next(batches)
    return precompile(first), itertools.chain([first], batches)


def _step(parts: LoopParts, watchdog: StepWatchdog, meter: StepMeter, step: int,
          batch: Any) -> tuple[float, float]:
    """One training step; returns its summed loss and the seconds of this rank's own compute."""
    parts.strategy.before_step(step)
    watchdog.start_step(step)
    meter.start_step()
    maybe_fault(parts.world.rank, f"step:{step}")
    computed = parts.adapter.compute_s
    loss = parts.strategy.step(batch)
    computed = parts.adapter.compute_s - computed
    parts.adapter.synchronize()  # the step time includes the step's queued device work
    return loss, computed


def _meter_step(meter: StepMeter, step: int, batch: Batch | None, loss: float, computed: float,
                computes: bool) -> None:
    """Close the step in the meter; a computing rank without a batch counts an idle step."""
    if batch is not None:
        meter.end_step(step, batch.words, batch.loss_tokens, batch.padded_tokens,
                       batch.sentences, loss, compute_s=computed)
    else:
        meter.end_step(step, 0, 0, 0, 0, 0.0, idle=computes)
