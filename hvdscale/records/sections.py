"""The nested sections of a run record, each key with its type, unit and meaning.

A section is a ``Section`` (a ``msgspec.Struct``): read by attribute (``rec.step_time.median``);
a key older writers left out is ``UNSET`` (falsy) and stays out when written back. The start-up
section is ``hvdscale.records.startup.Startup``; a launch's place,
``hvdscale.records.launch.LaunchPlace``.
"""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import UnsetType

from hvdscale.records.fields import UNSET, Doc, Section

MEASURE = "train/record.py build_record (the steps run: a target may end the run early)"
METER = "core/meter.py summarize"
RECORD = "train/record.py build_record"


class StepTime(Section, kw_only=True):
    """The job's step times over the measured window (a step lasts as long as its slowest rank)."""

    n: Annotated[int, Doc("measured steps")]
    median: Annotated[float, Doc("median step time", "s")]
    jitter: Annotated[float, Doc("1.4826 * median absolute deviation", "s")]
    mean: Annotated[float, Doc("mean step time", "s")]
    ci95: Annotated[float, Doc("half-width of the mean's 95% interval", "s")]
    min: Annotated[float, Doc("fastest step", "s")]
    max: Annotated[float, Doc("slowest step", "s")]


class RankIdle(Section, kw_only=True):
    """One computing rank's wait for slower ranks."""

    rank: Annotated[int, Doc("the rank")]
    idle_s: Annotated[float, Doc("seconds waited over the window", "s")]
    idle_ms_per_step: Annotated[float, Doc("waited per step", "ms")]
    idle_steps: Annotated[int, Doc("steps it had no batch for (out of data)")]
    compute_s: Annotated[float, Doc("seconds of its own compute", "s")]
    batches: Annotated[int | UnsetType, Doc("batches it had")] = UNSET


class Idle(Section, kw_only=True):  # every key optional
    """Straggler idle (empty where the strategy measured no compute times)."""

    synchronous: Annotated[bool | UnsetType, Doc("the ranks meet at every step")] = UNSET
    steps: Annotated[int | UnsetType, Doc("measured steps")] = UNSET
    per_rank: Annotated[list[RankIdle] | UnsetType, Doc("each computing rank's idle")] = UNSET
    idle_ms_per_step: Annotated[float | UnsetType, Doc("mean over ranks", "ms")] = UNSET
    idle_fraction: Annotated[float | UnsetType, Doc("share of the ranks' window spent "
                                                    "waiting")] = UNSET
    ranks_out_of_batches: Annotated[list[int] | UnsetType, Doc("ranks that ran out of "
                                                               "batches")] = UNSET


class RankTime(Section, kw_only=True):
    """One computing rank's window, for the breakdown of lost efficiency."""

    rank: Annotated[int, Doc("the rank")]
    words: Annotated[int, Doc("target words it trained", "words")]
    window_s: Annotated[float, Doc("its measured window", "s")]
    steps: Annotated[int, Doc("its measured steps")]
    step_s: Annotated[float, Doc("sum of its step times", "s")]
    compute_s: Annotated[float, Doc("sum of its compute times (communication excluded)", "s")]


class RankWindow(Section, kw_only=True):
    """One rank's words and window (serving ranks included)."""

    rank: Annotated[int, Doc("the rank")]
    words: Annotated[int, Doc("target words it trained", "words")]
    window_s: Annotated[float, Doc("its measured window", "s")]
    step_time_median: Annotated[float | None, Doc("its median step time", "s")]


class Measure(Section, kw_only=True):
    """What the window measured."""

    warmup_steps: Annotated[int, Doc("steps before the window (not measured)")]
    steps: Annotated[int, Doc("measured steps")]
    epochs: Annotated[int | float | None, Doc("epochs configured, if any")]
    aligned_buckets: Annotated[bool, Doc("every rank's step drew from one length bucket")]
    bucketing_mode: Annotated[str, Doc("how batches were bucketed by length")]
    batches_per_rank: Annotated[list[int], Doc("batches each rank had")]


class PaddingEntry(Section, kw_only=True):
    """Real tokens against padded slots for one way of batching."""

    words: Annotated[int, Doc("real tokens", "words")]
    slots: Annotated[int, Doc("padded token slots")]
    padded_fraction: Annotated[float, Doc("share of slots that were padding")]
    padding_ratio: Annotated[float | None, Doc("slots / real tokens")]
    rnn_work_slots: Annotated[int | UnsetType, Doc("slots the recurrence really ran")] = UNSET
    work_ratio: Annotated[float | UnsetType | None, Doc("rnn work slots / real tokens")] = UNSET


class Padding(Section, kw_only=True):
    """Padding of the window and of one epoch batched three ways."""

    window: Annotated[PaddingEntry, Doc("the measured window")]
    rnn_impl: Annotated[str | UnsetType, Doc("fused or loop: which slots the RNN runs")] = UNSET
    epoch_configured: Annotated[PaddingEntry, Doc("one epoch as configured")]
    epoch_unbucketed: Annotated[PaddingEntry, Doc("one epoch without bucketing")]
    epoch_pad_to_max: Annotated[PaddingEntry, Doc("one epoch padded to the longest")]


class Memory(Section, kw_only=True):
    """One rank's memory."""

    rank: Annotated[int, Doc("the rank")]
    peak_rss_mb: Annotated[float | None, Doc("peak resident memory", "MB")]
    rss_first_mb: Annotated[float | None, Doc("resident at the window's first step", "MB")]
    rss_last_mb: Annotated[float | None, Doc("resident at its end", "MB")]
    peak_gpu_mem_mb: Annotated[float | None, Doc("peak GPU memory (None on CPU)", "MB")]


class Device(Section, kw_only=True):
    """Where the ranks computed."""

    requested: Annotated[str, Doc("the config's device (cpu, cuda, auto)")]
    gpu: Annotated[dict[str, Any] | None, Doc("rank 0's GPU: name, driver, CUDA, cuDNN, NCCL")]
    shared_gpus: Annotated[Any, Doc("ranks that shared one GPU, if any")] = UNSET
    per_rank: Annotated[list[dict[str, Any]], Doc("each rank's device facts")]


class Threads(Section, kw_only=True):
    """Threads and Open MPI settings in force."""

    intra_op: Annotated[int, Doc("intra-op (compute) threads per rank")]
    inter_op: Annotated[int, Doc("inter-op threads per rank")]
    mpi_yield_when_idle: Annotated[str | None, Doc("OMPI_MCA_mpi_yield_when_idle")]
    mpi_btl: Annotated[str | UnsetType | None, Doc("OMPI_MCA_btl")] = UNSET
    cores: Annotated[int | UnsetType, Doc("cores rank 0 may run on (its CPU affinity): what "
                                          "its compute and communication threads share",
                                          "cores")] = UNSET


class Interval(Section, kw_only=True):
    """A precision target's blocks and the interval it reached (``measure.target_rel_ci``)."""

    target_rel_ci: Annotated[float, Doc("the target: relative 95% half-width")]
    block_steps: Annotated[int, Doc("steps per block")]
    max_seconds: Annotated[float, Doc("the measuring time limit", "s")]
    blocks: Annotated[list[dict[str, Any]], Doc("each block measured: its words and seconds")]
    words_per_s: Annotated[float, Doc("ratio estimate over the blocks", "words/s")]
    ci95: Annotated[float | None, Doc("95% half-width", "words/s")]
    rel_ci95: Annotated[float | None, Doc("ci95 / words_per_s")]
    met: Annotated[bool, Doc("the target was met")]
    stopped: Annotated[str, Doc("why measuring stopped")]


class Raw(Section, kw_only=True):
    """What each computing rank measured in the window, step by step (per-step lists, one per
    rank, in ``ranks`` order): every figure of the record and of the report recomputes from
    these (``hvdscale.records.steps``). Times are rounded to the microsecond."""

    ranks: Annotated[list[int], Doc("the computing ranks, in the order of the lists")]
    step_s: Annotated[list[list[float]], Doc("each rank's measured step times", "s")]
    compute_s: Annotated[list[list[float]], Doc("each rank's compute time per step "
                                                "(communication excluded; 0: unmeasured)", "s")]
    words: Annotated[list[list[int]], Doc("each rank's target words per step", "words")]
    warmup_s: Annotated[list[list[float]], Doc("each rank's warm-up step times", "s")]
