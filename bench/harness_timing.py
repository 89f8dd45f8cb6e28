"""Step timings for the overhead benchmarks (bench_overhead*.py): hvdscale's side is the run's
own step loop, ``hvdscale.train.loop.train_loop``, and the hand-written side a step function.

hvdscale is imported inside the functions: a script sets its thread environment and starts
Horovod before the libraries that read them load.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any


def time_train_loop(parts: Any, batch: Any, steps: int) -> tuple[list[float], Any]:
    """Run the run's loop for ``steps`` + 1 measured steps on ``batch``; the last ``steps``
    steps' times, and the loop's result.

    A step's time runs from the end of the step before to its own end: all the loop does per
    step (the strategy's step, device synchronisation, the meter, the watchdog, the progress
    report). The first step is not timed: it follows the window's opening (device
    synchronisation and a barrier, as in a run), which starts every rank's block together.
    """
    from hvdscale.core.batching import Schedule
    from hvdscale.train.loop import train_loop

    ends: list[float] = []
    done = train_loop(parts, Schedule(0, steps + 1, 0), itertools.repeat(batch),
                      lambda _: ends.append(time.perf_counter()))
    return [b - a for a, b in itertools.pairwise(ends)], done


def warm_up_loop(parts: Any, batch: Any, steps: int) -> None:
    """``steps`` warm-up steps of the run's loop on ``batch`` (nothing measured)."""
    from hvdscale.core.batching import Schedule
    from hvdscale.train.loop import train_loop

    train_loop(parts, Schedule(steps, 0, 0), itertools.repeat(batch))


def time_steps(step: Callable[[int], None], steps: int) -> list[float]:
    """Each call's time over ``steps`` calls of ``step(i)`` (the hand-written loop)."""
    times = []
    for i in range(steps):
        t = time.perf_counter()
        step(i)
        times.append(time.perf_counter() - t)
    return times
