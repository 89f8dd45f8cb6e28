"""Horovod's strategy, the parts no framework changes: its settings as HOROVOD_* variables, its
start-up, what it put in force, the timeline window and the strategy facts of the record.

Each framework plugs the allreduce into its own Horovod integration, in a subclass of
``HorovodBase`` in its package: ``hvdscale.frameworks.torch.horovod.HorovodTorch``
(``hvd.DistributedOptimizer``) and ``hvdscale.frameworks.tf.horovod.HorovodTF``
(``hvd.DistributedGradientTape`` inside the traced train step). Nothing here imports a framework.

Token-weighted and exact: each rank backpropagates its summed token loss scaled by
1/global_tokens (op=sum) or size/global_tokens (op=average, which divides by size again), so the
allreduced gradient is what one process computes on the union of the ranks' batches, however
uneven they are.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hvdscale.config import HorovodConfig
from hvdscale.core.device import CPU
from hvdscale.core.world import World, init_horovod
from hvdscale.errors import HvdscaleError
from hvdscale.strategies.base import Strategy

HOROVOD_DEFAULTS = {"fusion_threshold_bytes": 128 * 1024 * 1024, "cycle_time_ms": 1.0,
                    "cache_capacity": 1024}
"""Horovod 0.28.1's own values when nothing is set (``horovod/common/operations.cc``:
``SetTensorFusionThresholdBytes(128 * 1024 * 1024)``, ``SetCycleTimeMs(1)``; ``global_state.h``:
``cache_capacity = 1024``)."""


def horovod_env(cfg: HorovodConfig, timeline_file: str = "",
                autotune_log_file: str = "") -> dict[str, str]:
    """The HOROVOD_* variables that put ``cfg`` in force; exported before ``hvd.init()``.

    Args:
        cfg: the Horovod section.
        timeline_file: where the timeline goes (resolved by the runner; used when the whole
            run is captured, ``timeline_steps=0``; a window of steps uses DYNAMIC instead).
        autotune_log_file: where the autotuner's CSV goes (resolved by the runner).

    Raises:
        HvdscaleError: a timeline or autotune log path Horovod could not write (it would only
            log an error and go on without the file).
    """
    for key, path in (("strategy.horovod.timeline", timeline_file or cfg.timeline),
                      ("strategy.horovod.autotune_log",
                       (autotune_log_file or cfg.autotune_log) if cfg.autotune else "")):
        if path and path != "auto":  # "auto" is made concrete by the runner first
            _check_writable_file(key, path)
    env = {"HOROVOD_STALL_CHECK_TIME_SECONDS": f"{cfg.stall_check_s:g}"}
    if cfg.fusion_threshold_mb is not None:
        env["HOROVOD_FUSION_THRESHOLD"] = str(round(cfg.fusion_threshold_mb * 1024 * 1024))
    if cfg.cycle_time_ms is not None:
        env["HOROVOD_CYCLE_TIME"] = f"{cfg.cycle_time_ms:g}"
    if cfg.cache_capacity is not None:
        env["HOROVOD_CACHE_CAPACITY"] = str(cfg.cache_capacity)
    if cfg.hierarchical_allreduce:
        env["HOROVOD_HIERARCHICAL_ALLREDUCE"] = "1"
    if cfg.thread_affinity:
        env["HOROVOD_THREAD_AFFINITY"] = ",".join(str(c) for c in cfg.thread_affinity)
    if cfg.timeline:
        # DYNAMIC: Horovod records nothing until hvd.start_timeline() opens the file, so only
        # the chosen measured steps are captured.
        env["HOROVOD_TIMELINE"] = "DYNAMIC" if cfg.timeline_steps else timeline_file
        env["HOROVOD_TIMELINE_MARK_CYCLES"] = "1"
    if cfg.autotune:
        env["HOROVOD_AUTOTUNE"] = "1"
        env["HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE"] = str(cfg.autotune_steps_per_sample)
        env["HOROVOD_AUTOTUNE_WARMUP_SAMPLES"] = str(cfg.autotune_warmup_samples)
        env["HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES"] = str(cfg.autotune_bayes_samples)
        # Fixed, so the autotuner searches fusion x cycle time only: each tunable categorical
        # setting would multiply the number of trials (Horovod tunes them as nested loops).
        env.setdefault("HOROVOD_CACHE_CAPACITY", str(HOROVOD_DEFAULTS["cache_capacity"]))
        env["HOROVOD_HIERARCHICAL_ALLGATHER"] = "0"
        if autotune_log_file:
            env["HOROVOD_AUTOTUNE_LOG"] = autotune_log_file
    return env


def resolve_outputs(cfg: HorovodConfig, out_dir: str | Path, run_id: str) -> HorovodConfig:
    """``cfg`` with ``auto`` timeline and autotune-log paths made concrete in ``out_dir``."""
    from dataclasses import replace

    out = Path(out_dir)
    timeline = str(out / "timelines" / f"{run_id}.json") if cfg.timeline == "auto" \
        else cfg.timeline
    log = str(out / "autotune" / f"{run_id}.csv") if cfg.autotune_log == "auto" \
        else cfg.autotune_log
    # Only our own directories are made; a user's path must already lead somewhere (a typo
    # there is refused by horovod_env, not silently created).
    for f, asked in ((timeline, cfg.timeline), (log, cfg.autotune_log)):
        if asked == "auto":
            Path(f).parent.mkdir(parents=True, exist_ok=True)
    return replace(cfg, timeline=timeline, autotune_log=log)


def horovod_env_now() -> dict[str, str]:
    """This process's HOROVOD_* environment, as Horovod's background thread read it at init."""
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith("HOROVOD_")
            and k not in LAUNCHER_VARS}


# Set by horovodrun for each rank (placement and rendezvous), not settings of ours.
LAUNCHER_VARS = {"HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE",
                 "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE", "HOROVOD_HOSTNAME",
                 "HOROVOD_GLOO_RENDEZVOUS_ADDR", "HOROVOD_GLOO_RENDEZVOUS_PORT",
                 "HOROVOD_CONTROLLER", "HOROVOD_CPU_OPERATIONS", "HOROVOD_GLOO_IFACE"}


def in_force(env: dict[str, str], local_size: int, hosts: int, gpu_allreduce: bool = False
             ) -> dict[str, Any]:
    """The settings Horovod 0.28.1 derives from ``env`` at init, by its own rules.

    The fusion threshold is rounded up to a multiple of local_size x 8 bytes x 64 elements on a
    homogeneous job (``Controller::TensorFusionThresholdBytes``); hierarchical allreduce needs
    several hosts and an NCCL/DDL build; the autotuner, when on, changes fusion and cycle time
    as it goes (its log says to what).
    """
    raw = env.get("HOROVOD_FUSION_THRESHOLD")
    fusion = int(raw) if raw is not None else HOROVOD_DEFAULTS["fusion_threshold_bytes"]
    unit = max(1, local_size) * 8 * 64
    fusion_eff = -(-fusion // unit) * unit if fusion > 0 else 0
    cycle = env.get("HOROVOD_CYCLE_TIME")
    cache = env.get("HOROVOD_CACHE_CAPACITY")
    hier = env.get("HOROVOD_HIERARCHICAL_ALLREDUCE", "0") not in ("", "0")
    return {
        "fusion_threshold_bytes": fusion_eff,
        "fusion_threshold_source": "HOROVOD_FUSION_THRESHOLD" if raw is not None else "default",
        "cycle_time_ms": float(cycle) if cycle is not None else HOROVOD_DEFAULTS["cycle_time_ms"],
        "cache_capacity": int(cache) if cache is not None else HOROVOD_DEFAULTS["cache_capacity"],
        "hierarchical_allreduce": hier and hosts > 1 and gpu_allreduce,
        "hierarchical_allreduce_requested": hier,
        "thread_affinity": env.get("HOROVOD_THREAD_AFFINITY", ""),
        "autotune": env.get("HOROVOD_AUTOTUNE", "0") not in ("", "0"),
        "timeline": env.get("HOROVOD_TIMELINE", ""),
    }


def start_horovod(cfg: HorovodConfig, module: str, out_dir: str | Path, run_id: str,
                  local_size: int) -> tuple[HorovodConfig, dict[str, str]]:
    """Start Horovod's integration ``module`` (e.g. ``horovod.torch``) with ``cfg`` in force.

    Checks the thread affinity against the ranks on this host, makes ``auto`` output paths
    concrete for ``run_id`` in ``out_dir``, exports the settings and initialises Horovod.
    Returns the config with its paths resolved and the HOROVOD_* variables exported.

    Raises:
        HvdscaleError: fewer affinity cores than local ranks, or an output path Horovod could
            not write.
    """
    affinity = cfg.thread_affinity
    if affinity and len(affinity) < local_size:
        raise HvdscaleError(f"strategy.horovod.thread_affinity lists {len(affinity)} cores "
                            f"but {local_size} ranks run on this host: give one per rank")
    cfg = resolve_outputs(cfg, out_dir, run_id)
    env = horovod_env(cfg, cfg.timeline, cfg.autotune_log)
    # hvd: settings exported first, read once at init; the framework's own integration
    init_horovod(env, module)
    return cfg, env


def horovod_in_force(world: World) -> dict[str, Any]:
    """The record's ``horovod_used``: what each rank's Horovod read at init (its own
    environment), what follows from it, and whether that is the same on every rank."""
    envs = world.allgather(horovod_env_now())
    per_rank = [in_force(e, world.local_size, world.cross_size) for e in envs]
    return {"env_per_rank": envs, "in_force_per_rank": per_rank,
            "same_on_every_rank": all(f == per_rank[0] for f in per_rank)}


class TimelineCapture:
    """Horovod's timeline over a window of steps, and when each step's backward ran.

    With ``timeline_steps`` > 0 Horovod runs with HOROVOD_TIMELINE=DYNAMIC and the file is
    opened at the first captured step (see ``plan``) and closed ``timeline_steps`` steps later;
    with 0 it was opened by ``hvd.init()`` and is closed at the end. Only the coordinator
    (rank 0) writes a
    timeline in Horovod. Step marks are wall-clock seconds, the clock the timeline's
    ``start_time_since_epoch_in_micros`` is in, so backward and allreduce can be lined up.
    """

    def __init__(self, hvd: Any, cfg: HorovodConfig) -> None:
        self.hvd = hvd
        self.path = cfg.timeline
        self.steps = cfg.timeline_steps
        self.on = bool(self.path) and not self.steps  # whole run: open since hvd.init()
        self.first = 0
        self.marks: list[dict[str, float]] = []
        self.summary: dict[str, Any] | None = None

    def plan(self, window_steps: int, endless: bool) -> int:
        """Where the captured steps go: after the measured window when batches go on (the
        return value: extra steps to run), else the first measured steps (0 extra)."""
        if not self.path or not self.steps:
            return 0
        self.first = window_steps if endless else 0
        return self.steps if endless else 0

    def before_step(self, step: int) -> None:
        if not self.path or not self.steps:
            return
        if step == self.first:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self.hvd.start_timeline(self.path, mark_cycles=True)  # hvd:
            self.on = True
        elif step == self.first + self.steps and self.on:
            self.stop()

    def mark(self, **times: float) -> None:
        """Record this step's wall-clock marks (start, backward_start, backward_end, end)."""
        if self.on:
            self.marks.append(times)

    def stop(self) -> None:
        if self.on:
            self.hvd.stop_timeline()  # hvd: closes the file on rank 0 once its queue is written
            self.on = False

    def finish(self, rank: int) -> None:
        """Close the timeline; on rank 0 summarise it (a malformed file is one clear error)."""
        if not self.path:
            return
        self.stop()
        if rank == 0:
            from hvdscale.records.timeline import summarize_timeline

            self.summary = summarize_timeline(self.path, self.marks)


def _check_writable_file(key: str, path: str) -> None:
    p = Path(path)
    where = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise HvdscaleError(f"{key}={path} is a directory; give a file path")
    if not where.is_dir():
        raise HvdscaleError(f"{key}={path}: directory {where} does not exist")
    if not os.access(where, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise HvdscaleError(f"{key}={path} cannot be written (permissions)")


class HorovodBase(Strategy):
    """Horovod in every framework: the op and compression the config picks, the timeline window
    and the record's facts. A framework's subclass passes its own integration's module
    (``horovod.torch``, ``horovod.tensorflow``) and plugs the allreduce into its train step.
    """

    name = "horovod"

    def __init__(self, hvd: Any, cfg: HorovodConfig) -> None:
        self.hvd = hvd
        self.cfg = cfg
        self.op = hvd.Sum if cfg.op == "sum" else hvd.Average  # hvd:
        self.compression = hvd.Compression.fp16 if cfg.compression == "fp16" else \
            hvd.Compression.none
        self.timeline = TimelineCapture(hvd, cfg)

    def trace_plan(self, window_steps: int, endless: bool) -> int:
        return self.timeline.plan(window_steps, endless)

    def before_step(self, step: int) -> None:
        self.timeline.before_step(step)

    def finish(self) -> None:
        self.timeline.finish(self.hvd.rank())

    def info(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name, "op": self.cfg.op, "compression": self.cfg.compression,
            "gpu_operations": gpu_operations(self.hvd, _device_kind(self.adapter))}
        out.update(self.integration_info())
        out.update(_trace_info(self.cfg, self.timeline))
        return out

    def integration_info(self) -> dict[str, Any]:
        """The framework integration's own facts for the record (after the common ones)."""
        return {}


def _trace_info(cfg: HorovodConfig, timeline: TimelineCapture) -> dict[str, Any]:
    """The timeline summary and the parsed autotune log, for a strategy's record."""
    out: dict[str, Any] = {}
    if cfg.timeline:
        out["timeline"] = {"file": cfg.timeline, "steps": cfg.timeline_steps,
                           "summary": timeline.summary}
    if cfg.autotune and cfg.autotune_log:
        from hvdscale.records.autotune_log import read_autotune_log

        out["autotune"] = {"log": cfg.autotune_log, **read_autotune_log(cfg.autotune_log)}
    return out


def _device_kind(adapter: Any) -> str:
    return getattr(adapter, "placement", CPU).kind


def gpu_operations(hvd: Any, device_kind: str) -> dict[str, Any]:
    """Which collective ran the allreduce, as Horovod itself reports its build: device
    tensors go through NCCL only when Horovod was built with it; otherwise Horovod copies them
    to the host and uses MPI or Gloo."""
    nccl = bool(hvd.nccl_built())  # hvd:
    if device_kind != "cuda":
        op = "mpi" if hvd.mpi_enabled() else "gloo"  # hvd:
    else:
        op = "nccl" if nccl else "host copy + " + ("mpi" if hvd.mpi_enabled() else "gloo")
    return {"nccl_built": nccl, "allreduce": op, "device": device_kind}
