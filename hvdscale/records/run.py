"""The run record: what one completed training run (a sweep's point) measured, field by field.

Rank 0 writes one per run into ``results.jsonl``: ``hvdscale.train.record.build_record``
assembles it from its writers' parts (the run's identity, the meter's window, the ranks'
memory and devices), and the runner ``fill``s what later phases know (start-up, quality,
interval, launch). Readers use the attributes; the properties below are the derived figures
the report, predictor and sweep share.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from hvdscale.config.load import to_dict as config_dict
from hvdscale.config.model import ModelConfig
from hvdscale.config.run import RunConfig
from hvdscale.config.strategy import HorovodConfig
from hvdscale.records.fields import Doc, Record
from hvdscale.records.launch import LaunchPlace
from hvdscale.records.sections import (
    MEASURE,
    METER,
    RECORD,
    Device,
    Idle,
    Interval,
    Measure,
    Memory,
    Padding,
    RankIdle,
    RankTime,
    RankWindow,
    Raw,
    StepTime,
    Threads,
)
from hvdscale.records.startup import Startup

RUNNER = "train/runner.py"


class RunRecord(Record, tag="run", kw_only=True):
    """One completed training run."""

    kind: ClassVar[str] = "run"
    summary: ClassVar[str] = "a completed training run: one point of a sweep"

    status: Annotated[Literal["ok"], Doc("a failed point is a failed record", writer=RECORD)]
    name: Annotated[str, Doc("the config's name", writer=RECORD)]
    started: Annotated[str, Doc("when the run started (ISO 8601, UTC)", writer=RECORD)]
    finished: Annotated[str, Doc("when rank 0 wrote the record (ISO 8601, UTC)", writer=RECORD)]
    argv: Annotated[list[str], Doc("the command line of rank 0", writer=RECORD)]
    config: Annotated[RunConfig, Doc("the resolved config (hvdscale.config), every key "
                                     "written; a key an older file lacks reads as its default",
                                     writer=RECORD)]
    key: Annotated[dict[str, Any], Doc("the point's experiment and series "
                                       "(records/experiment.py)", writer=RECORD)]
    ranks: Annotated[int, Doc("ranks launched", writer=RECORD)]
    workers: Annotated[int, Doc("ranks that computed gradients (a server does not)",
                                writer=RECORD)]
    hosts: Annotated[list[str], Doc("hosts the ranks ran on, sorted", writer=RECORD)]
    rank_hosts: Annotated[list[str], Doc("each rank's host, in rank order", writer=RECORD)]
    launcher_backend: Annotated[str, Doc("mpi, horovod (horovodrun) or torchrun", writer=RECORD)]
    threads: Annotated[Threads, Doc("threads and MPI settings in force", writer=RECORD)]
    horovod_env: Annotated[dict[str, Any], Doc("HOROVOD_* variables set", writer=RECORD)]
    horovod_used: Annotated[dict[str, Any] | None, Doc("Horovod settings in force per rank",
                                                writer=RECORD)]
    loadavg: Annotated[list[float], Doc("the host's 1, 5, 15 min load when rank 0 wrote the "
                                        "record", writer=RECORD)]
    versions: Annotated[dict[str, Any], Doc("python, torch, tensorflow, horovod, MPI...",
                                            writer=RECORD)]
    git: Annotated[str | None, Doc("the checkout's revision (+dirty)", writer=RECORD)]
    strategy: Annotated[dict[str, Any], Doc("what the strategy said of itself (timeline...)",
                                            writer="strategies/*.py info()")]
    model_params: Annotated[int, Doc("trainable parameters", writer=RECORD)]
    vocab: Annotated[dict[str, int], Doc("src and tgt vocabulary sizes", writer=RECORD)]
    truncated_sentences_rank0: Annotated[int, Doc("rank 0's sentences cut to max length",
                                                  writer=RECORD)]
    measure: Annotated[Measure, Doc("what the window measured", writer=MEASURE)]
    padding: Annotated[Padding, Doc("padding of the window and of an epoch", writer=RECORD)]
    final_loss: Annotated[float | None, Doc("loss per token at the last step", writer=RECORD)]
    fingerprints: Annotated[list[Any], Doc("each rank's parameter sum and l2 at the end (None "
                                           "for a serving rank)", writer=RECORD)]
    memory: Annotated[list[Memory], Doc("each rank's memory", writer=RECORD)]
    device: Annotated[Device, Doc("where the ranks computed", writer=RECORD)]
    per_rank: Annotated[list[RankWindow], Doc("each rank's words and window", writer=RECORD)]
    window_s: Annotated[float, Doc("the longest rank's measured window", "s", METER)]
    words: Annotated[int, Doc("target words trained in the window, all workers", "words",
                              METER)]
    words_per_s: Annotated[float, Doc("words / window_s", "words/s", METER)]
    per_rank_words_per_s: Annotated[list[float], Doc("each worker's own rate", "words/s",
                                                     METER)]
    sentences: Annotated[int, Doc("sentences in the window, all workers", writer=METER)]
    loss_tokens: Annotated[int, Doc("tokens the loss was taken over", writer=METER)]
    padded_tokens: Annotated[int, Doc("token slots including padding", writer=METER)]
    padded_fraction: Annotated[float, Doc("share of slots that were padding", writer=METER)]
    idle: Annotated[Idle, Doc("straggler idle", writer=METER)]
    rank_times: Annotated[list[RankTime], Doc("each worker's step and compute sums",
                                              writer=METER)]
    step_time: Annotated[StepTime, Doc("the job's step times", writer=METER)]
    step_time_deciles: Annotated[list[float], Doc("median step time of each tenth of the "
                                                  "window (empty under 10 steps)", "s", METER)]
    warmup_time_s: Annotated[float, Doc("the slowest rank's warm-up", "s", METER)]
    mean_loss: Annotated[float | None, Doc("loss per token over the window", writer=METER)]
    cpu_busy: Annotated[float | None, Doc("cores a computing rank kept busy over the window: "
                                          "its process's CPU seconds per second, mean over "
                                          "ranks", "cores", METER)] = None
    host_cores: Annotated[int | None, Doc("the host's cores, beside its load", writer=RECORD)
                          ] = None
    precision: Annotated[dict[str, Any] | None, Doc("dtypes computed in and the wire dtype",
                                                    writer=RECORD)] = None
    compile: Annotated[dict[str, Any] | None, Doc("what compiling the step cost (None: not "
                                                  "compiled)", writer=RECORD)] = None
    startup: Annotated[Startup | None, Doc("each rank's start-up by phase", writer=RUNNER)
                       ] = None
    quality: Annotated[dict[str, Any] | None, Doc("training to a target: its curve and time "
                                                  "to target", writer="train/until.py")] = None
    interval: Annotated[Interval | None, Doc("the precision target's blocks",
                                             writer="train/blocks.py")] = None
    launch: Annotated[LaunchPlace | None, Doc("its place in a launch of several points",
                                              writer="train/points.py")] = None
    raw: Annotated[Raw | None, Doc("each computing rank's per-step times and words (absent "
                                   "in records written before issue 61)", writer=METER)] = None

    @property
    def ok(self) -> bool:
        """A completed run (every run record is)."""
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        """The record as a file holds it, its config with every key (a reader in another
        language needs no defaults table)."""
        return {**super().to_dict(), "config": config_dict(self.config)}

    @property
    def strategy_name(self) -> str:
        """The configured strategy's name."""
        return self.config.strategy.name

    @property
    def horovod_settings(self) -> HorovodConfig:
        """The config's Horovod section."""
        return self.config.strategy.horovod

    @property
    def model_config(self) -> ModelConfig:
        """The config's ``model`` section."""
        return self.config.model

    @property
    def configured_precision(self) -> str:
        """The configured precision (fp32 where the config predates the setting)."""
        return self.config.precision

    @property
    def measured_steps(self) -> int:
        """Steps in the measured window."""
        return self.measure.steps

    @property
    def step_median_s(self) -> float:
        """The median step time over the window."""
        return self.step_time.median

    @property
    def intra_op_threads(self) -> int:
        """Intra-op threads a rank used."""
        return self.threads.intra_op or 1

    @property
    def idle_fraction(self) -> float:
        """Share of the computing ranks' time spent waiting (0 where unmeasured)."""
        return self.idle.idle_fraction or 0.0

    @property
    def idle_ms_per_step(self) -> float:
        """Milliseconds per step a computing rank waits, mean over ranks (0: unmeasured)."""
        return self.idle.idle_ms_per_step or 0.0

    @property
    def idle_per_rank(self) -> list[RankIdle]:
        """Per computing rank: its idle."""
        return list(self.idle.per_rank or [])

    @property
    def timeline_summary(self) -> dict[str, Any]:
        """The Horovod timeline's summary; ``{}`` without a timeline."""
        return (self.strategy.get("timeline") or {}).get("summary") or {}

    @property
    def warmup_s(self) -> float:
        """Seconds of the warm-up (0 when not recorded)."""
        return float(self.warmup_time_s or 0.0)

    @property
    def quality_or_empty(self) -> dict[str, Any]:
        """``quality``, or ``{}`` for a run that evaluated nothing."""
        return self.quality or {}
