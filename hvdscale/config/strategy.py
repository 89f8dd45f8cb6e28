"""How gradients are shared: Horovod's settings, the parameter server's, and the choice."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from hvdscale.config.fields import check as _check
from hvdscale.registry import names as strategy_names

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
    """Both frameworks: ``dense`` allreduces the embedding gradients as dense tensors;
    ``gathered`` allgathers the touched rows and their indices instead (TensorFlow's
    IndexedSlices with ``sparse_as_dense=False``; PyTorch's embeddings switched to sparse
    gradients, ``nn.Embedding(sparse=True)``, reduced by Horovod's sparse allgather) and adds
    them into the dense gradient before the (dense, exact) optimizer step. Dense is the default
    by measurement at np=2 with a small vocabulary (bench/BENCHMARKS.md, issue 10)."""

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
    sparse_embeddings: Literal["auto", "on", "off"] = "off"
    """Embedding gradients pushed as (unique row ids, summed rows) instead of dense tables:
    ``on`` always, ``off`` never, ``auto`` per step and segment when ids and rows take at most
    half the dense bytes (``hvdscale.strategies.sparse_rows``). The server's update stays dense
    and exact; with plain SGD pulls send only the changed rows."""

    def __post_init__(self) -> None:
        _check(self.num_servers >= 1, "strategy.ps.num_servers", "must be >= 1", self.num_servers)
        _check(self.sparse_embeddings in ("auto", "on", "off"), "strategy.ps.sparse_embeddings",
               "must be auto, on or off", self.sparse_embeddings)
        _check(self.placement in ("colocated", "dedicated"), "strategy.ps.placement",
               "must be colocated or dedicated", self.placement)


MWMS_COMMUNICATION = ("auto", "ring", "nccl")


@dataclass(frozen=True)
class MWMSConfig:
    """TensorFlow's ``MultiWorkerMirroredStrategy`` (``strategy.name=mwms``, framework tf).

    Its cluster (``TF_CONFIG``) is built from the launcher's ranks and hosts; a ``TF_CONFIG``
    the user exported wins (it must list one worker per rank, this rank's index its own)."""

    communication: Literal["auto", "ring", "nccl"] = "auto"
    """Collective implementation (``CommunicationOptions.implementation``): ``ring`` (gRPC
    ring all-reduce, on CPUs and GPUs), ``nccl`` (GPUs only: an error on a rank that sees no
    GPU), ``auto`` (TensorFlow picks: NCCL on GPUs, ring otherwise)."""
    port: int = 0
    """Port of each worker's gRPC server: 0 lets each rank pick a free port on its host (agreed
    over MPI); N > 0 gives local rank r the port N + r (for firewalled hosts)."""
    bytes_per_pack_mb: float = 0.0
    """``CommunicationOptions.bytes_per_pack`` in MiB: the gradients are all-reduced in packs
    of about this size (MWMS's tensor fusion); 0 keeps TensorFlow's default (one pack)."""
    timeout_s: float = 0.0
    """``CommunicationOptions.timeout_seconds``: a collective that waits longer fails; 0: no
    timeout (the run's step watchdog still ends a stuck job)."""

    def __post_init__(self) -> None:
        k = "strategy.mwms."
        _check(self.communication in MWMS_COMMUNICATION, k + "communication",
               f"must be one of {', '.join(MWMS_COMMUNICATION)}", self.communication)
        _check(0 <= self.port <= 65535, k + "port", "must be in [0, 65535]", self.port)
        _check(0 <= self.bytes_per_pack_mb <= 8192, k + "bytes_per_pack_mb",
               "must be in [0, 8192] MiB", self.bytes_per_pack_mb)
        _check(self.timeout_s >= 0, k + "timeout_s", "must be >= 0", self.timeout_s)


DDP_HOOKS = ("none", "fp16", "bf16", "powersgd")
DDP_IDLE = ("zero", "join")


@dataclass(frozen=True)
class DDPConfig:
    """PyTorch's ``DistributedDataParallel`` (``strategy.name=ddp``); every value is recorded."""

    bucket_cap_mb: float = 25.0
    """Gradient bucket size in MiB (DDP's default 25). Always passed to DDP, so its first
    bucket has this cap too: torch's 1 MiB first bucket applies only when DDP is given no
    size. The record's ``strategy.first_bucket_mb`` is the cap DDP actually used."""
    gradient_as_bucket_view: bool = False
    """Gradients are views into DDP's buckets (saves a copy per bucket and the memory)."""
    static_graph: bool = False
    """Tell DDP the graph is the same every step (it may then reorder buckets after the first)."""
    find_unused_parameters: bool = False
    """Search the graph for parameters without a gradient each step (never needed here)."""
    comm_hook: Literal["none", "fp16", "bf16", "powersgd"] = "none"
    """Communication hook: ``none`` (fp32 allreduce), ``fp16`` or ``bf16`` (compress each bucket
    for the wire), ``powersgd`` (low-rank compression, error feedback)."""
    powersgd_rank: int = 1
    """PowerSGD's matrix approximation rank."""
    powersgd_start_iter: int = 10
    """Steps of plain allreduce before PowerSGD starts (PowerSGD's own default is 10)."""
    idle: Literal["zero", "join"] = "join"
    """Epoch mode, a rank out of batches: ``join`` uses DDP's ``join()`` (the idle rank shadows
    the others' collectives until all are done, computing nothing; its optimizer state then
    lags, parameters are synced from the last rank at the end); ``zero`` takes part in each
    step with a zero gradient (a loss scaled by 0 on a two-token sentence: the same bucket
    allreduces and optimizer step). join is the default by measurement: np=2, demo config,
    bucketed epoch, 3 paired rounds, join/zero words/s x1.25-1.54 (bench/bench_ddp.py; the
    zero step's compute competes for the cores). join is refused with a bucketing mode other
    than per_rank or with evaluation during the epochs (hvdscale.config.run)."""
    timeout_s: float = 120.0
    """torch.distributed's collective timeout: a rank waiting this long on a dead peer fails
    instead of hanging (the project's supervisor usually ends the job sooner)."""

    def __post_init__(self) -> None:
        k = "strategy.ddp."
        _check(0 < self.bucket_cap_mb <= 8192, k + "bucket_cap_mb", "must be in (0, 8192] MiB",
               self.bucket_cap_mb)
        _check(self.comm_hook in DDP_HOOKS, k + "comm_hook",
               f"must be one of {', '.join(DDP_HOOKS)}", self.comm_hook)
        _check(self.powersgd_rank >= 1, k + "powersgd_rank", "must be >= 1", self.powersgd_rank)
        _check(self.powersgd_start_iter >= 2, k + "powersgd_start_iter",
               "must be >= 2 (PowerSGD's own minimum)", self.powersgd_start_iter)
        _check(self.idle in DDP_IDLE, k + "idle", f"must be one of {', '.join(DDP_IDLE)}",
               self.idle)
        _check(self.timeout_s > 0, k + "timeout_s", "must be > 0", self.timeout_s)


@dataclass(frozen=True)
class StrategyConfig:
    """How gradients are shared across ranks."""

    name: str = "horovod"
    """A registered strategy (``hvdscale.registry``): ``horovod`` (allreduce), ``ps``
    (MPI parameter server), ``independent`` (no communication: the ideal case), ``ddp``
    (PyTorch's DistributedDataParallel, torch only), ``mwms`` (TensorFlow's
    MultiWorkerMirroredStrategy, tf only), or one a plugin registers."""
    horovod: HorovodConfig = field(default_factory=HorovodConfig)
    """Horovod settings."""
    ps: PSConfig = field(default_factory=PSConfig)
    """Parameter-server settings."""
    ddp: DDPConfig = field(default_factory=DDPConfig)
    """DistributedDataParallel settings."""
    mwms: MWMSConfig = field(default_factory=MWMSConfig)
    """TensorFlow MultiWorkerMirroredStrategy settings."""

    def workers(self, ranks: int) -> int:
        """Ranks that compute out of ``ranks``: all, except a dedicated parameter server's
        serve-only ranks."""
        if self.name == "ps" and self.ps.placement == "dedicated":
            return max(0, ranks - self.ps.num_servers)
        return ranks

    def __post_init__(self) -> None:
        known = strategy_names()
        _check(self.name in known, "strategy.name", f"must be one of {', '.join(known)}, or one "
               "that a plugin module named in HVDSCALE_STRATEGY_PLUGINS registers", self.name)
