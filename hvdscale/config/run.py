"""One run: the whole YAML file (measurement, threads, device and the sections), and the check
of a config against the launch that runs it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from hvdscale.config.data_source import DataConfig
from hvdscale.config.fields import check as _check
from hvdscale.config.model import ModelConfig, OptimConfig
from hvdscale.config.quality import UntilConfig
from hvdscale.config.strategy import StrategyConfig
from hvdscale.errors import ConfigError
from hvdscale.registry import FRAMEWORKS, launch_refusal
from hvdscale.registry import get as get_strategy

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
"""The values of ``precision`` (docs/precision.md)."""


@dataclass(frozen=True)
class MeasureConfig:
    """What is timed."""

    warmup_steps: int = 10
    """Steps run before timing starts (the seed notes: the first batches pay for allocation)."""
    steps: int = 20
    """Measured steps."""
    step_timeout_s: float = 0.0
    """End the job when one step takes longer than this (0: no limit)."""
    run_timeout_s: float | None = None
    """End the job when the whole run (start-up, data loading, set-up, training, the closing
    barriers and gather) takes longer than this, naming the phase and the rank that did not
    arrive; 0: no limit. None (default) scales with the configured work: 600 s + 30 s per step
    (warm-up included), or 600 s + 3600 s per epoch with ``epochs``."""
    epochs: int = 0
    """0: measure ``steps`` steps from an endless stream of batches (every rank always has one).
    N >= 1: measure N whole epochs instead (``steps`` is then ignored): each rank trains on
    all of its own batches, and with bucketing ranks hold different numbers of them. The ranks
    agree on the step count up front (the most batches any rank has); a rank that has run out
    takes part in the remaining steps with no batch (zero gradient, zero tokens: exact) and that
    time is recorded as idle. Warm-up steps come before the epochs, from extra batches."""
    eval_every: int = 0
    """Evaluate on the held-out set every this many measured steps (0: never, unless
    ``eval_every_s`` or ``until`` asks). Evaluation is outside the measured window."""
    eval_every_s: float = 0.0
    """Evaluate every this many seconds of training time instead (0: by steps)."""
    eval_batch_size: int = 64
    """Sentences per evaluation batch."""
    eval_max_sentences: int = 0
    """Evaluate on at most this many held-out sentences (0: the whole evaluation set)."""
    until: UntilConfig = field(default_factory=UntilConfig)
    """Train to a quality target instead of a fixed step count (hvdscale.config.quality)."""
    noise_scale: bool = True
    """At each evaluation, estimate the gradient noise scale B_simple from the per-rank and
    averaged gradients of the batch just trained (one extra allreduce, outside training time;
    hvdscale.train.noise_scale). Changes nothing that is trained."""
    target_rel_ci: float = 0.0
    """Measure until the 95% interval of words/s is within +- this fraction of it (e.g. 0.02),
    in blocks of ``block_steps``, at least 3 blocks, at most ``max_seconds`` of measured time
    (hvdscale.train.blocks); ``steps`` is then not used. 0: measure ``steps`` steps."""
    block_steps: int = 10
    """Steps per block under ``target_rel_ci``."""
    max_seconds: float = 60.0
    """Under ``target_rel_ci``: stop after this many measured seconds, target met or not."""

    def __post_init__(self) -> None:
        _check(self.eval_every >= 0, "measure.eval_every", "must be >= 0", self.eval_every)
        _check(self.eval_every_s >= 0, "measure.eval_every_s", "must be >= 0", self.eval_every_s)
        _check(not (self.eval_every and self.eval_every_s), "measure.eval_every_s",
               "cannot be set together with measure.eval_every", self.eval_every_s)
        _check(isinstance(self.noise_scale, bool), "measure.noise_scale", "must be true or false",
               self.noise_scale)
        _check(self.eval_batch_size >= 1, "measure.eval_batch_size", "must be >= 1",
               self.eval_batch_size)
        _check(self.eval_max_sentences >= 0, "measure.eval_max_sentences", "must be >= 0",
               self.eval_max_sentences)
        if self.until.active:
            _check(self.epochs == 0, "measure.epochs", "must be 0 with measure.until (the "
                   "run's length is its target)", self.epochs)
            _check(bool(self.eval_every or self.eval_every_s), "measure.eval_every",
                   "(or eval_every_s) must be set with measure.until", self.eval_every)
        _check_target(self)
        _check(self.warmup_steps >= 0, "measure.warmup_steps", "must be >= 0", self.warmup_steps)
        _check(self.steps >= 1, "measure.steps", "must be >= 1", self.steps)
        _check(self.epochs >= 0, "measure.epochs", "must be >= 0", self.epochs)
        _check(self.step_timeout_s >= 0, "measure.step_timeout_s", "must be >= 0",
               self.step_timeout_s)
        _check(self.run_timeout_s is None or self.run_timeout_s >= 0, "measure.run_timeout_s",
               "must be >= 0 (0: no limit) or null (scaled with the work)", self.run_timeout_s)

    def run_deadline_s(self) -> float:
        """The whole run's time limit in seconds (0: none); see ``run_timeout_s``."""
        if self.run_timeout_s is not None:
            return self.run_timeout_s
        if self.until.active:  # the cap plus room for evaluation, set-up and the gather
            return 600.0 + 3.0 * self.until.max_time_s + 30.0 * self.warmup_steps
        if self.target_rel_ci:  # the cap, a last block past it, set-up and the gather
            return 600.0 + 2.0 * self.max_seconds + 30.0 * (self.warmup_steps + self.block_steps)
        if self.epochs:
            return 600.0 + 3600.0 * self.epochs + 30.0 * self.warmup_steps
        return 600.0 + 30.0 * (self.warmup_steps + self.steps)


def _check_target(m: MeasureConfig) -> None:
    """``target_rel_ci`` and its block settings."""
    _check(0.0 <= m.target_rel_ci < 1.0, "measure.target_rel_ci",
           "must be a fraction in [0, 1), e.g. 0.02 for +-2% (0: measure `steps` steps)",
           m.target_rel_ci)
    _check(m.block_steps >= 1, "measure.block_steps", "must be >= 1", m.block_steps)
    _check(m.max_seconds > 0, "measure.max_seconds", "must be > 0", m.max_seconds)
    if m.target_rel_ci:
        _check(m.epochs == 0 and not m.until.active, "measure.target_rel_ci",
               "measures a fixed stream of steps: it cannot be set with measure.epochs or "
               "measure.until", m.target_rel_ci)


@dataclass(frozen=True)
class ThreadsConfig:
    """Compute threads per rank; recorded in every record."""

    intra_op: int = 0
    """Intra-op threads; 0 gives the machine's cores divided among the ranks on it (at least 1)."""
    inter_op: int = 1
    """Inter-op threads."""
    mpi_yield: Literal["auto", "on", "off"] = "auto"
    """OpenMPI's mpi_yield_when_idle: waiting ranks yield the core instead of spinning. ``auto``
    turns it on when the ranks' compute threads plus Horovod's background thread outnumber the
    host's cores (measured here: otherwise the spinning steals the compute core)."""

    def __post_init__(self) -> None:
        _check(self.mpi_yield in ("auto", "on", "off"), "threads.mpi_yield",
               "must be auto, on or off", self.mpi_yield)
        _check(self.intra_op >= 0, "threads.intra_op", "must be >= 0", self.intra_op)
        _check(self.inter_op >= 1, "threads.inter_op", "must be >= 1", self.inter_op)


@dataclass(frozen=True)
class RunConfig:
    """One run: the whole YAML file."""

    name: str = "run"
    """Label of the run in records and reports."""
    framework: str = "torch"
    """Deep-learning framework: ``torch`` (PyTorch) or ``tf`` (TensorFlow). Picks the model
    implementation, the adapter and Horovod's integration; the other framework is never
    imported."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """Model section."""
    data: DataConfig = field(default_factory=DataConfig)
    """Data section."""
    optim: OptimConfig = field(default_factory=OptimConfig)
    """Optimizer section."""
    strategy: StrategyConfig = field(default_factory=StrategyConfig)
    """Gradient-sharing strategy section."""
    measure: MeasureConfig = field(default_factory=MeasureConfig)
    """Measurement section."""
    threads: ThreadsConfig = field(default_factory=ThreadsConfig)
    """Thread section."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where each rank computes: ``auto`` (a GPU per local rank when the process sees one, else
    the CPU), ``cpu``, or ``cuda`` (an error at start-up on every rank when no GPU is visible).
    Rank r uses GPU ``local_rank % visible GPUs``; more ranks than GPUs on a host share them,
    with a warning, and the record's ``device.per_rank[].shared_by`` says so."""
    tf32: Literal["default", "on", "off"] = "default"
    """TensorFloat-32 on GPUs (no effect on CPUs): ``off`` makes matmuls and cuDNN's RNNs true
    fp32 (for exactness checks and the fp32 rows of a comparison), ``on`` allows TF32 in both,
    ``default`` keeps the framework's own choice (PyTorch: matmuls off, cuDNN on; TensorFlow:
    on). The record's ``device.gpu.tf32`` says what was in force. With ``precision`` fp32 or
    tf32 it may only agree with it (``default`` follows ``precision``)."""
    precision: Literal["fp32", "tf32", "bf16", "fp16"] = "fp32"
    """Compute precision (docs/precision.md). ``fp32``: true fp32 (TF32 off on GPUs);
    ``tf32``: fp32 with TF32 matmuls (GPU only: refused on a CPU); ``bf16``: autocast to
    bfloat16; ``fp16``: autocast to float16 with a dynamic loss scaler (on a CPU it runs,
    slowly, for correctness; refused with ``strategy.name=ps``). Parameters, gradients and
    the optimizer stay fp32 in every precision (master weights): the strategies get fp32
    gradients and send what their own settings choose (``strategy.horovod.compression``,
    ``strategy.ddp.comm_hook``); the record's ``precision`` says both. PyTorch only:
    TensorFlow refuses all but fp32."""

    def __post_init__(self) -> None:
        # The registry's names, in the words a Literal field's check uses.
        _check(self.framework in FRAMEWORKS, "framework",
               f"must be one of {', '.join(FRAMEWORKS)}", self.framework)
        _check(self.device in ("auto", "cpu", "cuda"), "device",
               "must be 'auto', 'cpu' or 'cuda'", self.device)
        _check(self.tf32 in ("default", "on", "off"), "tf32",
               "must be 'default', 'on' or 'off'", self.tf32)
        check_precision(self)
        spec = get_strategy(self.strategy.name)  # e.g. a framework's own data parallelism
        _check(self.framework in spec.frameworks, "strategy.name",
               f"{spec.name} is {spec.about} and needs framework="
               f"{' or framework='.join(spec.frameworks)}, not framework={self.framework}",
               spec.name)
        kind = self.data.synthetic.kind
        task = self.model.data_kind
        _check(kind == "uniform" or (kind == "markov") == (task == "lm"),
               "data.synthetic.kind", f"{kind} does not fit a model of task {task} "
               "(markov: lm, mapped: nmt)", kind)
        if self.data.source == "text" and task == "nmt":
            _check(bool(self.data.text.tgt), "data.text.tgt",
                   "must name the target-side file for an nmt model", self.data.text.tgt)
        check_ddp_join(self)  # settings DDP's join context would deadlock on


def check_precision(cfg: RunConfig) -> None:
    """Refuse a precision (or RNN implementation) the framework or strategy cannot run, or a
    precision that ``tf32`` contradicts."""
    p = cfg.precision
    _check(p in PRECISIONS, "precision", "must be " + ", ".join(PRECISIONS), p)
    wants = {"fp32": "off", "tf32": "on"}.get(p)
    _check(wants is None or cfg.tf32 in ("default", wants), "precision",
           f"{p} needs tf32=default or tf32={wants}, not tf32={cfg.tf32}", p)
    if cfg.framework == "tf":
        _check(p == "fp32", "precision",
               "with framework=tf must be fp32: Keras' mixed-precision policies act on Keras "
               "layers, and hvdscale's TensorFlow models are tf.Module code they never reach "
               "(docs/precision.md)", p)
        _check(cfg.model.rnn_impl != "compiled", "model.rnn_impl",
               "compiled is PyTorch's torch.compile; with framework=tf use fused or loop "
               "(docs/precision.md says why XLA is not offered)", cfg.model.rnn_impl)
    spec = get_strategy(cfg.strategy.name)
    _check(spec.precisions is None or p in spec.precisions, "precision",
           f"{p} with strategy.name={spec.name} is refused: {spec.refuses}", p)
    impl = cfg.model.rnn_impl
    _check(spec.rnn_impls is None or impl in spec.rnn_impls, "model.rnn_impl",
           f"{impl} with strategy.name={spec.name} is refused: {spec.refuses}", impl)


def check_precision_device(precision: str, device_kind: str) -> None:
    """Refuse ``precision=tf32`` on a CPU (every rank alike, once its device is resolved)."""
    _check(precision != "tf32" or device_kind == "cuda", "precision",
           "tf32 is a GPU tensor-core mode and this rank computes on the CPU (use fp32 or bf16 "
           "there, or device=cuda on a GPU host)", precision)


def tf32_in_force(cfg: RunConfig) -> str:
    """The ``tf32`` mode the framework is set to: ``precision`` fp32 or tf32 decides it,
    otherwise the ``tf32`` key (for the matmuls autocast leaves in fp32)."""
    return {"fp32": "off", "tf32": "on"}.get(cfg.precision, cfg.tf32)


def check_launch(cfg: RunConfig, ranks: int, mpi: bool | str) -> None:
    """Reject a config that ``ranks`` ranks cannot run (the preflight checks it on every rank,
    the sweep for every point before the first launch).

    Args:
        cfg: the run config.
        ranks: ranks of the job.
        mpi: the launch (``hvdscale.core.world.launch_kind``: ``mpi``, ``gloo``,
            ``torchrun``); True: an MPI job, False: ``horovodrun --gloo``.

    Raises:
        ConfigError: a strategy that does not run under this launch (the registry's
            ``launches``), more servers than ranks, or dedicated servers that leave no worker.
    """
    s = cfg.strategy
    launch = mpi if isinstance(mpi, str) else ("mpi" if mpi else "gloo")
    refusal = launch_refusal(get_strategy(s.name), launch)
    if refusal:
        raise ConfigError(refusal)
    if s.name != "ps":
        return
    if s.ps.num_servers > ranks:
        raise ConfigError(f"strategy.ps.num_servers={s.ps.num_servers} is more than the "
                          f"{ranks} ranks of this job")
    if s.ps.placement == "dedicated" and s.ps.num_servers >= ranks:
        raise ConfigError(f"strategy.ps.placement=dedicated with num_servers="
                          f"{s.ps.num_servers} leaves no worker among {ranks} ranks")


# --- strategy.ddp.idle=join across sections ------------------------------------------------
# Settings DDP's join context cannot run.
#
# A joined rank stays inside one ``strategy.step`` call, shadowing the others' collectives, until
# every rank has joined. That is sound only when a rank without a batch has no batch left in the
# window: with ``measure.epochs`` and ``data.bucketing.mode=per_rank``. Anything that needs a
# joined rank back before the window ends (a later batch, an evaluation) would deadlock, so the
# config is refused at load time, identically on every rank, before any collective.

_DDP_IDLE_FIX = "use strategy.ddp.idle=zero"


def check_ddp_join(cfg: RunConfig) -> None:
    """Refuse ``strategy.ddp.idle=join`` where a joined rank would be needed back.

    Raises:
        ConfigError: ``idle=join`` in epoch mode with a bucketing mode other than
            ``per_rank`` (a rank idles mid-epoch and has batches again later), or with
            ``measure.eval_every``/``eval_every_s`` (a joined rank cannot reach the evaluation).
    """
    m = cfg.measure
    if cfg.strategy.name != "ddp" or cfg.strategy.ddp.idle != "join" or m.epochs == 0:
        return  # without epochs no rank idles: the join context is never entered
    mode = cfg.data.bucketing.mode
    if mode != "per_rank":
        raise ConfigError(f"strategy.ddp.idle=join needs data.bucketing.mode=per_rank with "
                          f"measure.epochs (got {mode}: a rank idles mid-epoch and has batches "
                          f"again later, after it joined); {_DDP_IDLE_FIX}")
    if m.eval_every or m.eval_every_s:
        key = "measure.eval_every" if m.eval_every else "measure.eval_every_s"
        value = m.eval_every or m.eval_every_s
        raise ConfigError(f"strategy.ddp.idle=join cannot evaluate during measure.epochs "
                          f"(got {key}={value:g}: a rank that joined waits inside its step "
                          f"until every rank finishes the epoch, so it cannot take part in an "
                          f"evaluation); {_DDP_IDLE_FIX}")
