"""Run configuration: YAML read with pyyaml into frozen dataclasses.

Every section is its own dataclass and each component is handed only its own section. Unknown
keys, wrong types and out-of-range values are rejected with a message that names the dotted key,
e.g. ``strategy.ps.num_servers must be >= 1 (got 0)``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from hvdscale.errors import ConfigError


def _check(cond: bool, key: str, msg: str, value: Any) -> None:
    if not cond:
        raise ConfigError(f"{key} {msg} (got {value!r})")


@dataclass(frozen=True)
class ModelConfig:
    """The network trained; read only by the model builders."""

    kind: Literal["nmt", "lm"] = "nmt"
    """``nmt``: seq2seq LSTM translation model; ``lm``: RNN language model."""
    rnn_impl: Literal["fused", "loop"] = "fused"
    """``fused``: the library kernel (``nn.LSTM``, the seed notes' cudnn_lstm); ``loop``: an
    explicit per-time-step cell loop (the seed notes' dynamic_rnn)."""
    embed_dim: int = 64
    """Embedding width."""
    hidden_size: int = 64
    """LSTM state size (a bidirectional encoder splits it between the two directions)."""
    encoder_layers: int = 1
    """Encoder LSTM layers (nmt) or LSTM layers (lm)."""
    decoder_layers: int = 1
    """Decoder LSTM layers (nmt only)."""
    bidirectional: bool = True
    """Bidirectional encoder (the seed notes' ``--direction=bi``)."""
    attention: bool = False
    """Luong-style dot attention over the encoder outputs (nmt only)."""
    src_vocab: int = 1000
    """Source vocabulary size; with text corpora, 0 takes it from the data."""
    tgt_vocab: int = 1000
    """Target vocabulary size (nmt; the lm uses ``src_vocab``); 0 takes it from the data."""
    seed: int = 1234
    """Seed of the initial parameters (rank 0's are broadcast where the strategy syncs)."""

    def __post_init__(self) -> None:
        _check(self.kind in ("nmt", "lm"), "model.kind", "must be 'nmt' or 'lm'", self.kind)
        _check(self.rnn_impl in ("fused", "loop"), "model.rnn_impl", "must be 'fused' or 'loop'",
               self.rnn_impl)
        for name in ("embed_dim", "hidden_size", "encoder_layers", "decoder_layers"):
            _check(getattr(self, name) >= 1, f"model.{name}", "must be >= 1", getattr(self, name))
        if self.bidirectional and self.kind == "nmt":
            _check(self.hidden_size % 2 == 0, "model.hidden_size",
                   "must be even with a bidirectional encoder", self.hidden_size)
        for name in ("src_vocab", "tgt_vocab"):
            v = getattr(self, name)
            _check(v == 0 or v >= 5, f"model.{name}", "must be 0 (from data) or >= 5", v)


@dataclass(frozen=True)
class SyntheticConfig:
    """Seeded synthetic sentences (the seed notes' ``--use_synthetic_data``)."""

    sentences_per_rank: int = 2048
    """Pool of sentences each rank draws its batches from."""
    length_dist: Literal["fixed", "uniform", "lognormal"] = "lognormal"
    """``fixed``: every sentence ``max_len`` long (the seeds' synthetic runs); ``uniform`` in
    [min_len, max_len]; ``lognormal``: long-tailed like real corpora, clipped to the range."""
    min_len: int = 3
    """Shortest sentence, in tokens."""
    max_len: int = 100
    """Longest sentence, in tokens (the seeds' ``--src_max_len``)."""
    mean_len: float = 25.0
    """Mean length for ``lognormal`` (before clipping)."""
    tgt_len_ratio: float = 1.1
    """Target length / source length (nmt)."""

    def __post_init__(self) -> None:
        _check(self.sentences_per_rank >= 1, "data.synthetic.sentences_per_rank", "must be >= 1",
               self.sentences_per_rank)
        _check(self.length_dist in ("fixed", "uniform", "lognormal"), "data.synthetic.length_dist",
               "must be fixed, uniform or lognormal", self.length_dist)
        _check(self.min_len >= 1, "data.synthetic.min_len", "must be >= 1", self.min_len)
        _check(self.max_len >= self.min_len, "data.synthetic.max_len",
               f"must be >= data.synthetic.min_len ({self.min_len})", self.max_len)
        _check(self.mean_len > 0, "data.synthetic.mean_len", "must be > 0", self.mean_len)
        _check(self.tgt_len_ratio > 0, "data.synthetic.tgt_len_ratio", "must be > 0",
               self.tgt_len_ratio)


@dataclass(frozen=True)
class TextConfig:
    """Corpora read from files: one sentence per line, whitespace-separated tokens."""

    src: str = ""
    """Source-side file (nmt) or the corpus (lm)."""
    tgt: str = ""
    """Target-side file, line-aligned with ``src`` (nmt only)."""
    src_vocab_file: str = ""
    """Vocabulary file (one token per line); empty builds it from the data."""
    tgt_vocab_file: str = ""
    """Target vocabulary file (nmt); empty builds it from the data."""
    max_vocab: int = 30000
    """Most frequent tokens kept when the vocabulary is built from the data."""
    max_len: int = 100
    """Sentences longer than this are truncated (the seeds' ``--src_max_len``)."""

    def __post_init__(self) -> None:
        _check(self.max_vocab >= 5, "data.text.max_vocab", "must be >= 5", self.max_vocab)
        _check(self.max_len >= 1, "data.text.max_len", "must be >= 1", self.max_len)


@dataclass(frozen=True)
class BucketConfig:
    """Length bucketing: sentences of similar length share a batch, so less is padding."""

    enabled: bool = False
    """Group sentences by length before batching."""
    boundaries: tuple[int, ...] = ()
    """Bucket upper bounds in tokens (a sentence's length is its longer side); empty gives
    geometric bounds 8, x1.25, ... up to the longest sentence."""
    tokens_per_batch: int = 0
    """Batch to a token budget (sentences x longest length, so padding counts) instead of
    ``data.batch_size`` sentences; 0 batches by sentence count. Per rank under weak scaling;
    the global budget, divided across ranks, under strong scaling."""
    mode: Literal["per_rank", "aligned", "global"] | None = None
    """How the ranks' batches of a step are formed (unset: ``per_rank``). ``per_rank``: each
    rank batches its own shard and shuffles its own buckets. ``aligned``: as ``per_rank``, but
    at each step every rank takes its batch from the same length bucket (a bucket sequence
    drawn with a seed all ranks share, agreed with one small allgather before training; with
    ``measure.epochs`` a bucket gets as many steps as the rank with most batches in it holds,
    others idle there; with a fixed step count buckets are drawn in proportion to their
    batches, and a rank with none in the drawn bucket takes its nearest). ``global``: every
    rank derives the same sequence of global batches from the whole corpus with the shared
    seed, one bucket each, to the global batch (``tokens_per_batch`` or ``data.batch_size``,
    per rank x ranks under weak scaling); each step's global batch is split across the ranks
    into contiguous length ranges with equal padded token slots (the work of an RNN step), so
    no rank waits for one that drew longer sentences. A rank whose part of a step is empty
    takes part with no batch. An RNN step lasts as long as its longest sentence, not its token
    count: that is what ``aligned`` and ``global`` address."""
    align_ranks: bool = False
    """Deprecated alias of ``mode: aligned`` (kept so older configs run); set ``mode``."""

    def __post_init__(self) -> None:
        _check(list(self.boundaries) == sorted(set(self.boundaries)), "data.bucketing.boundaries",
               "must be strictly increasing", list(self.boundaries))
        _check(all(b >= 1 for b in self.boundaries), "data.bucketing.boundaries",
               "must be positive", list(self.boundaries))
        _check(self.tokens_per_batch >= 0, "data.bucketing.tokens_per_batch", "must be >= 0",
               self.tokens_per_batch)
        _check(self.mode in (None, "per_rank", "aligned", "global"), "data.bucketing.mode",
               "must be per_rank, aligned or global", self.mode)
        if self.align_ranks and self.mode not in (None, "aligned"):
            raise ConfigError(f"data.bucketing.align_ranks=true (deprecated: it means "
                              f"data.bucketing.mode=aligned) conflicts with "
                              f"data.bucketing.mode={self.mode}; set only data.bucketing.mode")
        mode = self.mode or ("aligned" if self.align_ranks else "per_rank")
        # Resolved once here, so code and records read one field: mode (align_ranks mirrors it).
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "align_ranks", mode == "aligned")
        if not self.enabled and mode != "per_rank":
            raise ConfigError(f"data.bucketing.mode={mode} needs data.bucketing.enabled=true")


@dataclass(frozen=True)
class DataConfig:
    """Where sentences come from and how they are batched per rank."""

    source: Literal["synthetic", "text"] = "synthetic"
    """``synthetic`` (seeded random sentences) or ``text`` (files in ``data.text``)."""
    batch_size: int = 32
    """Sentences per rank per step (weak scaling), or the global batch (strong scaling)."""
    scaling: Literal["weak", "strong"] = "weak"
    """``weak``: fixed per-rank batch (the usual case); ``strong``: ``batch_size`` is the global
    batch, divided across ranks (uneven remainders go to the lowest ranks)."""
    pad_to: Literal["batch", "max"] = "batch"
    """Pad each batch to its longest sentence, or every batch to the maximum length."""
    shuffle: bool = True
    """Shuffle each epoch (seeded)."""
    seed: int = 1
    """Seed of the data (synthetic sentences and shuffling); each rank offsets it by its rank."""
    synthetic: SyntheticConfig = field(default_factory=SyntheticConfig)
    """Synthetic data settings."""
    text: TextConfig = field(default_factory=TextConfig)
    """Text corpus settings."""
    bucketing: BucketConfig = field(default_factory=BucketConfig)
    """Length bucketing settings."""

    def __post_init__(self) -> None:
        _check(self.source in ("synthetic", "text"), "data.source", "must be synthetic or text",
               self.source)
        _check(self.batch_size >= 1, "data.batch_size", "must be >= 1", self.batch_size)
        _check(self.scaling in ("weak", "strong"), "data.scaling", "must be weak or strong",
               self.scaling)
        _check(self.pad_to in ("batch", "max"), "data.pad_to", "must be batch or max", self.pad_to)
        if self.source == "text":
            _check(bool(self.text.src), "data.text.src", "must name a corpus file with "
                   "data.source=text", self.text.src)


@dataclass(frozen=True)
class OptimConfig:
    """The optimizer, identical under every strategy so all train the same function."""

    name: Literal["sgd", "momentum", "adam"] = "sgd"
    """``sgd``, ``momentum`` (heavy-ball SGD) or ``adam``."""
    lr: float = 0.5
    """Learning rate, applied to the token-averaged gradient."""
    momentum: float = 0.9
    """Momentum for ``momentum``."""
    betas: tuple[float, float] = (0.9, 0.999)
    """Adam's betas."""
    eps: float = 1e-8
    """Adam's epsilon."""

    def __post_init__(self) -> None:
        _check(self.name in ("sgd", "momentum", "adam"), "optim.name",
               "must be sgd, momentum or adam", self.name)
        _check(self.lr > 0, "optim.lr", "must be > 0", self.lr)
        _check(0 <= self.momentum < 1, "optim.momentum", "must be in [0, 1)", self.momentum)
        _check(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas), "optim.betas",
               "must be two values in [0, 1)", list(self.betas))


OVERLAP_MODES = ("hooks", "after-backward")


@dataclass(frozen=True)
class HorovodConfig:
    """Horovod settings; exported to the environment before ``hvd.init()`` on every rank.

    ``None`` keeps Horovod's own default (0.28.1, ``horovod/common/operations.cc``: fusion
    threshold 128 MiB, cycle time 1 ms, response cache 1024 entries).
    """

    op: Literal["sum", "average"] = "sum"
    """Reduction op of the gradient allreduce. Both give the exact token-weighted update: the
    local loss is scaled by 1/global_tokens (sum) or size/global_tokens (average)."""
    compression: Literal["none", "fp16"] = "none"
    """Gradient compression on the wire."""
    overlap: Literal["hooks", "after-backward"] = "hooks"
    """``hooks`` (Horovod's way): each gradient is allreduced from a backward hook as soon as it
    is ready, overlapping the rest of backward. ``after-backward``: one allreduce of the flat
    gradient buffer once backward is done (a single request per step, so the background thread
    negotiates and wakes up less)."""
    fusion_threshold_mb: float | None = None
    """HOROVOD_FUSION_THRESHOLD in MiB (0 turns tensor fusion off); None keeps Horovod's default
    of 128 MiB."""
    cycle_time_ms: float | None = None
    """HOROVOD_CYCLE_TIME in ms: how often the background thread looks for ready tensors; None
    keeps Horovod's default of 1 ms."""
    num_groups: int = 0
    """Grouped allreduce: split the gradients into this many groups, each allreduced as one
    request (``hooks``: Horovod's ``groups=`` of ``DistributedOptimizer``; ``after-backward``:
    the flat buffer in this many slices, one grouped request). 0: no groups."""
    cache_capacity: int | None = None
    """HOROVOD_CACHE_CAPACITY: response cache entries (0 turns the cache off); None keeps
    Horovod's default of 1024."""
    hierarchical_allreduce: bool = False
    """HOROVOD_HIERARCHICAL_ALLREDUCE: allreduce within each host, then across hosts. Horovod
    uses it only with several hosts and only in NCCL/DDL builds; the record says whether it was
    in force."""
    thread_affinity: tuple[int, ...] = ()
    """HOROVOD_THREAD_AFFINITY: the core of each local rank's background thread, one entry per
    rank on a host (e.g. [0, 1]); empty leaves the thread unpinned."""
    timeline: str = ""
    """Horovod timeline (chrome://tracing JSON): ``""`` off; ``auto`` writes it into the results
    directory (``timelines/``); any other value is the file's path. Summarised into the record."""
    timeline_steps: int = 5
    """With a timeline: steps captured. With a fixed step count they run after the measured
    window (so tracing never slows a timed step; they train too, after the record's
    fingerprint is taken); with ``measure.epochs`` they are the first measured steps. 0
    captures the whole run from ``hvd.init()``."""
    autotune: bool = False
    """HOROVOD_AUTOTUNE: let Horovod tune fusion threshold and cycle time online (leave
    ``fusion_threshold_mb`` and ``cycle_time_ms`` unset, or Horovod keeps them fixed)."""
    autotune_log: str = ""
    """HOROVOD_AUTOTUNE_LOG: CSV of the autotuner's trials (``auto``: into the results
    directory); parsed into the record."""
    autotune_steps_per_sample: int = 10
    """HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE (Horovod's default 10; a trial is 5 samples)."""
    autotune_warmup_samples: int = 3
    """HOROVOD_AUTOTUNE_WARMUP_SAMPLES: trials discarded first (Horovod's default 3)."""
    autotune_bayes_samples: int = 20
    """HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES: Bayesian-optimisation trials (Horovod's default
    20)."""
    stall_check_s: float = 60.0
    """HOROVOD_STALL_CHECK_TIME_SECONDS: warn when a rank has not joined a collective."""
    embedding_grads: Literal["dense", "gathered"] = "dense"
    """TensorFlow only (PyTorch's embedding gradients are dense): ``dense`` converts the
    embeddings' IndexedSlices gradients to dense tensors and allreduces them; ``gathered``
    allgathers the touched rows and their indices instead (``sparse_as_dense=False``). Dense is
    the default by measurement at np=2 (bench/BENCHMARKS.md, issue 10)."""

    def __post_init__(self) -> None:
        k = "strategy.horovod."
        _check(self.op in ("sum", "average"), k + "op", "must be sum or average", self.op)
        _check(self.compression in ("none", "fp16"), k + "compression",
               "must be none or fp16", self.compression)
        _check(self.overlap in OVERLAP_MODES, k + "overlap",
               f"must be one of {', '.join(OVERLAP_MODES)}", self.overlap)
        if self.fusion_threshold_mb is not None:
            _check(0 <= self.fusion_threshold_mb <= 8192, k + "fusion_threshold_mb",
                   "must be in [0, 8192] MiB", self.fusion_threshold_mb)
        if self.cycle_time_ms is not None:
            _check(0 < self.cycle_time_ms <= 10000, k + "cycle_time_ms",
                   "must be in (0, 10000]", self.cycle_time_ms)
        _check(self.num_groups >= 0, k + "num_groups", "must be >= 0", self.num_groups)
        if self.cache_capacity is not None:
            _check(self.cache_capacity >= 0, k + "cache_capacity", "must be >= 0",
                   self.cache_capacity)
        _check(all(c >= 0 for c in self.thread_affinity), k + "thread_affinity",
               "must list core ids >= 0", list(self.thread_affinity))
        _check(self.timeline_steps >= 0, k + "timeline_steps", "must be >= 0",
               self.timeline_steps)
        for name in ("autotune_steps_per_sample", "autotune_bayes_samples"):
            _check(getattr(self, name) >= 1, k + name, "must be >= 1", getattr(self, name))
        _check(self.autotune_warmup_samples >= 0, k + "autotune_warmup_samples",
               "must be >= 0", self.autotune_warmup_samples)
        _check(self.stall_check_s > 0, k + "stall_check_s", "must be > 0", self.stall_check_s)
        if self.autotune:
            fixed = self.fusion_threshold_mb is not None and self.cycle_time_ms is not None
            _check(not fixed, k + "autotune",
                   "has nothing to tune with both fusion_threshold_mb and cycle_time_ms set; "
                   "unset one", self.autotune)
        _check(self.embedding_grads in ("dense", "gathered"), k + "embedding_grads",
               "must be dense or gathered", self.embedding_grads)


@dataclass(frozen=True)
class PSConfig:
    """The MPI parameter-server baseline."""

    num_servers: int = 1
    """Parameter servers; parameters are partitioned among them."""
    placement: Literal["colocated", "dedicated"] = "colocated"
    """``dedicated``: the first ``num_servers`` ranks only serve; ``colocated``: every rank
    computes and the first ``num_servers`` ranks also serve a shard."""

    def __post_init__(self) -> None:
        _check(self.num_servers >= 1, "strategy.ps.num_servers", "must be >= 1", self.num_servers)
        _check(self.placement in ("colocated", "dedicated"), "strategy.ps.placement",
               "must be colocated or dedicated", self.placement)


STRATEGIES = ("horovod", "independent", "ps")


@dataclass(frozen=True)
class StrategyConfig:
    """How gradients are shared across ranks."""

    name: Literal["horovod", "independent", "ps"] = "horovod"
    """``horovod`` (allreduce), ``ps`` (MPI parameter server), ``independent`` (no
    communication: the ideal case)."""
    horovod: HorovodConfig = field(default_factory=HorovodConfig)
    """Horovod settings."""
    ps: PSConfig = field(default_factory=PSConfig)
    """Parameter-server settings."""

    def __post_init__(self) -> None:
        _check(self.name in STRATEGIES, "strategy.name", f"must be one of {', '.join(STRATEGIES)}",
               self.name)


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

    def __post_init__(self) -> None:
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
        if self.epochs:
            return 600.0 + 3600.0 * self.epochs + 30.0 * self.warmup_steps
        return 600.0 + 30.0 * (self.warmup_steps + self.steps)


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
    framework: Literal["torch", "tf"] = "torch"
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

    def __post_init__(self) -> None:
        _check(self.framework in ("torch", "tf"), "framework", "must be 'torch' or 'tf'",
               self.framework)
        _check(self.device in ("auto", "cpu", "cuda"), "device",
               "must be 'auto', 'cpu' or 'cuda'", self.device)
        _check(self.framework == "tf" or self.strategy.horovod.embedding_grads == "dense",
               "strategy.horovod.embedding_grads", "'gathered' applies to framework=tf only",
               self.strategy.horovod.embedding_grads)
        if self.data.source == "text" and self.model.kind == "nmt":
            _check(bool(self.data.text.tgt), "data.text.tgt",
                   "must name the target-side file for model.kind=nmt", self.data.text.tgt)


def check_launch(cfg: RunConfig, ranks: int, mpi: bool) -> None:
    """Reject a config that ``ranks`` ranks cannot run (the runner checks it on every rank,
    the sweep for every point before the first launch).

    Args:
        cfg: the run config.
        ranks: ranks of the job.
        mpi: whether the job is an MPI job (not ``horovodrun --gloo``).

    Raises:
        ConfigError: a parameter server without MPI, more servers than ranks, or dedicated
            servers that leave no worker.
    """
    s = cfg.strategy
    if s.name != "ps":
        return
    if not mpi:
        raise ConfigError("strategy.name=ps needs an MPI launch (mpirun, srun --mpi=pmix, "
                          "or horovodrun without --gloo)")
    if s.ps.num_servers > ranks:
        raise ConfigError(f"strategy.ps.num_servers={s.ps.num_servers} is more than the "
                          f"{ranks} ranks of this job")
    if s.ps.placement == "dedicated" and s.ps.num_servers >= ranks:
        raise ConfigError(f"strategy.ps.placement=dedicated with num_servers="
                          f"{s.ps.num_servers} leaves no worker among {ranks} ranks")


# --- loading -----------------------------------------------------------------------------------

def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check ``value`` against annotation ``tp``; return it converted where lossless."""
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{key} must be a mapping (got {value!r})")
        return _build(tp, value, key)
    if origin is Literal:
        choices = typing.get_args(tp)
        if value not in choices:
            names = ", ".join(map(str, choices))
            raise ConfigError(f"{key} must be one of {names} (got {value!r})")
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        last: ConfigError | None = None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key)
            except ConfigError as e:
                last = e
        raise last or ConfigError(f"{key} has a bad value (got {value!r})")
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{key} must be a list (got {value!r})")
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(v, args[0], f"{key}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise ConfigError(f"{key} must have {len(args)} entries (got {value!r})")
        pairs = enumerate(zip(value, args, strict=True))
        return tuple(_coerce(v, a, f"{key}[{i}]") for i, (v, a) in pairs)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key} must be true or false (got {value!r})")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key} must be an integer (got {value!r})")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{key} must be a number (got {value!r})")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key} must be a string (got {value!r})")
        return value
    raise ConfigError(f"{key}: unsupported type {_type_name(tp)}")  # pragma: no cover


def _build(cls: type, data: dict[str, Any], prefix: str) -> Any:
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if k not in names:
            known = ", ".join(sorted(names))
            raise ConfigError(f"unknown config key '{key}' (known here: {known})")
        kwargs[k] = _coerce(v, hints[k], key)
    return cls(**kwargs)


def _parse_override(item: str) -> tuple[list[str], Any]:
    if "=" not in item:
        raise ConfigError(f"--set expects key=value (got {item!r})")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key or any(not p for p in key.split(".")):
        raise ConfigError(f"--set has an empty key (got {item!r})")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"--set {key}: value is not valid YAML: {e}") from None
    return key.split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return ``data`` with each ``a.b.c=value`` override applied (values parsed as YAML)."""
    for item in overrides:
        path, value = _parse_override(item)
        node = data
        for i, part in enumerate(path[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ConfigError(f"--set {'.'.join(path)}: {'.'.join(path[: i + 1])} is not a "
                                  "section")
            node = child
        node[path[-1]] = value
    return data


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> RunConfig:
    """Read a YAML run config, apply ``--set`` overrides and validate everything.

    Args:
        path: YAML file; None starts from the defaults.
        overrides: ``key=value`` strings with dotted keys, e.g. ``strategy.name=independent``.

    Returns:
        The validated, frozen config.

    Raises:
        ConfigError: missing file, malformed YAML, unknown key, wrong type or bad value.
    """
    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file not found: {p}")
        try:
            loaded = yaml.safe_load(p.read_bytes().decode("utf-8"))
        except UnicodeDecodeError as e:
            raise ConfigError(f"config file {p} is not UTF-8 text (byte {e.start}); "
                              "is it a YAML config?") from None
        except OSError as e:
            raise ConfigError(f"config file {p} cannot be read: {e.strerror or e}") from None
        except yaml.YAMLError as e:
            raise ConfigError(f"config file {p} is not valid YAML: {e}") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {p} must hold a mapping at the top level")
        data = loaded
    data = apply_overrides(data, overrides or [])
    cfg = _build(RunConfig, data, "")
    return cfg


def to_dict(cfg: Any) -> dict[str, Any]:
    """The config as plain data (tuples become lists) for JSON records."""
    def conv(v: Any) -> Any:
        if isinstance(v, tuple | list):
            return [conv(x) for x in v]
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        return v
    return conv(dataclasses.asdict(cfg))
