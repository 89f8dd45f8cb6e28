"""Timing one matrix product on a framework's back end, for ``hvdscale gemm``
(``hvdscale.study.stepcost.gemm``): the operands' layout, the back end and its threads, the
clock (this process's CPU time or wall time), and the repeated calls a time is taken over.

The back end is ``hvdscale.frameworks.<framework>.gemm``; it builds the operands once and
returns a callable that runs one product. Its library reads the thread environment when it
starts, so ``set_thread_env`` comes before ``load_backend``. On a GPU the clock waits for the
device (``_sync``) before it starts and before it stops.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from hvdscale.errors import HvdscaleError
from hvdscale.registry import LIBRARIES, check_framework


@dataclass(frozen=True)
class Layout:
    """One matmul call: operand shapes and transpose flags."""

    a: tuple[int, int]
    b: tuple[int, int]
    ta: bool
    tb: bool


def flops(m: int, n: int, k: int) -> int:
    """Floating-point operations of one M x N x K product (a multiply and an add each)."""
    return 2 * m * n * k


Prepare = Callable[[Layout], Callable[[], object]]


def set_thread_env(threads: int) -> None:
    # Read once when the math libraries start, so set before any framework import.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "TF_NUM_INTRAOP_THREADS"):
        os.environ[var] = str(threads)


def load_backend(framework: str) -> Callable[[int], Callable[..., Callable[[], object]]]:
    """``hvdscale.frameworks.<framework>.gemm.backend``: given a thread count, it returns
    ``prepare(a_shape, b_shape, ta, tb)``. It imports the framework: set the thread
    environment first (``set_thread_env``).

    Raises:
        ValueError: an unknown framework. HvdscaleError: its library is not installed.
    """
    check_framework(framework, "--framework")
    try:
        module = importlib.import_module(f"hvdscale.frameworks.{framework}.gemm")
    except ModuleNotFoundError as e:
        missing = (e.name or "").partition(".")[0]
        if missing in ("", "hvdscale"):
            raise
        raise HvdscaleError(f"--framework {framework}: {missing} is not installed") from None
    return module.backend


def check_installed(framework: str) -> None:
    """A registered framework whose library is installed, found without importing it (a
    framework imported before another is timed could change that one's figures)."""
    check_framework(framework, "--framework")
    library = LIBRARIES[framework]
    if importlib.util.find_spec(library) is None:
        raise HvdscaleError(f"--framework {framework}: {library} is not installed")


CLOCKS = ("auto", "wall", "cpu")
_clock: Callable[[], float] = time.perf_counter
_sync: Callable[[], None] = lambda: None  # noqa: E731  (the device's wait; a no-op on CPU)


def resolve_clock(clock: str, threads: int, device: str = "cpu") -> str:
    """``auto``: the process's CPU time with one thread, wall time with more or on a GPU.

    On a shared machine other processes take turns on the core; wall time then counts their
    turns too, while the CPU time of this process counts only its own work. With several
    threads CPU time adds the threads up, so only wall time gives their joint speed; a GPU's
    work is not this process's CPU time at all.
    """
    if clock not in CLOCKS:
        raise HvdscaleError(f"--clock must be one of {', '.join(CLOCKS)} (got {clock!r})")
    if device != "cpu":
        if clock == "cpu":
            raise HvdscaleError("--clock cpu cannot time GPU work: use wall or auto")
        return "wall"
    if clock == "auto":
        return "cpu" if threads == 1 else "wall"
    return clock


def use_clock(clock: str) -> None:
    """Time with ``clock`` (``cpu`` or ``wall``, as ``resolve_clock`` answers) from now on."""
    global _clock
    _clock = time.process_time if clock == "cpu" else time.perf_counter


def calls_for(fn: Callable[[], object], min_time_s: float) -> int:
    """Calls per timed repeat so that one repeat lasts about ``min_time_s``."""
    _sync()
    t0 = _clock()
    fn()
    _sync()
    one = max(_clock() - t0, 1e-7)
    return max(1, int(min_time_s / one + 0.5))


def time_calls(fn: Callable[[], object], calls: int) -> float:
    _sync()  # nothing queued before the clock starts, all of it done before it stops
    t0 = _clock()
    for _ in range(calls):
        fn()
    _sync()
    return (_clock() - t0) / calls


def measure_peak(prepare: Prepare, size: int, repeats: int = 3) -> dict[str, float]:
    """Best GFLOP/s of a square ``size`` GEMM (after one warm-up call)."""
    fn = prepare(Layout((size, size), (size, size), False, False))
    fn()
    best = min(time_calls(fn, 1) for _ in range(repeats))
    return {"size": size, "time_s": best, "gflops": flops(size, size, size) / best / 1e9}


def device_backend(framework: str, device: str, threads: int,
                   precision: str) -> Callable[..., Callable[[], object]]:
    """The framework's preparer for ``device`` and ``precision`` on ``threads``; sets ``_sync``
    (HvdscaleError: a GPU or a precision other than fp32 asked of TensorFlow)."""
    global _sync
    make = load_backend(framework)
    if device == "cpu" and precision == "fp32":
        _sync = lambda: None  # noqa: E731
        return make(threads)
    if framework != "torch":
        raise HvdscaleError(f"--device {device} --precision {precision}: only --framework "
                            "torch times GEMMs on a GPU or in other precisions")
    module = importlib.import_module("hvdscale.frameworks.torch.gemm")
    prepare = make(threads, device, precision)
    _sync = module.synchronizer(device)
    return prepare
