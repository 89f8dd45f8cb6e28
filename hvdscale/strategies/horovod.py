"""Horovod allreduce through each framework's own integration: ``hvd.DistributedOptimizer`` for
PyTorch (``HorovodTorch``), ``hvd.DistributedGradientTape`` inside the traced train step for
TensorFlow (``HorovodTF``).

Token-weighted and exact: each rank backpropagates its summed token loss scaled by
1/global_tokens (op=sum) or size/global_tokens (op=average, which divides by size again), so the
allreduced gradient is what one process computes on the union of the ranks' batches, however
uneven they are. With PyTorch the global token count is allreduced asynchronously, overlapping
the forward.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hvdscale.config import HorovodConfig
from hvdscale.core.data import Batch
from hvdscale.core.device import CPU
from hvdscale.errors import HvdscaleError
from hvdscale.strategies.base import Strategy

if TYPE_CHECKING:
    from hvdscale.frameworks.tf import TFAdapter
    from hvdscale.frameworks.torch import TorchAdapter


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


class HorovodTorch(Strategy):
    """Horovod for the PyTorch adapter, with two ways of overlapping communication.

    ``hooks``: ``hvd.DistributedOptimizer`` allreduces each gradient from its backward hook
    (grouped into ``num_groups`` requests if set). ``after-backward``: one allreduce (one
    grouped request of ``num_groups`` slices) of the adapter's flat gradient buffer after
    backward, then the plain optimizer step.
    """

    name = "horovod"
    adapter: TorchAdapter

    def __init__(self, cfg: HorovodConfig) -> None:
        import horovod.torch as hvd  # hvd:

        self.hvd = hvd
        self.cfg = cfg
        self.op = hvd.Sum if cfg.op == "sum" else hvd.Average  # hvd:
        self.compression = hvd.Compression.fp16 if cfg.compression == "fp16" else \
            hvd.Compression.none
        self.state_broadcast = False
        self.timeline = TimelineCapture(hvd, cfg)

    def setup(self, adapter: TorchAdapter) -> None:  # type: ignore[override]
        import torch

        hvd = self.hvd
        super().setup(adapter)
        model, opt = adapter.model, adapter.optimizer
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # hvd:
        # A fresh optimizer has empty state on every rank and Horovod's broadcast would take a
        # dummy step to create it (advancing Adam's step count): broadcast only real state.
        n_state = torch.tensor([len(opt.state_dict()["state"])], dtype=torch.float64)
        if float(hvd.allreduce(n_state, op=hvd.Sum, name="hvdscale.optstate")) > 0:  # hvd:
            hvd.broadcast_optimizer_state(opt, root_rank=0)  # hvd:
            adapter.restore_grad_views()
            self.state_broadcast = True
        if self.cfg.overlap == "hooks":
            self.optimizer = hvd.DistributedOptimizer(  # hvd:
                opt, named_parameters=model.named_parameters(), compression=self.compression,
                op=self.op, groups=self.cfg.num_groups or None)
        else:
            self.optimizer = opt
            # Views into the flat buffer: the allreduce works in place, no copies.
            n = max(1, min(self.cfg.num_groups, adapter.num_params))
            self.slices = list(torch.tensor_split(adapter.flat_grads, n))
        self.size = hvd.size()

    def trace_plan(self, window_steps: int, endless: bool) -> int:
        return self.timeline.plan(window_steps, endless)

    def before_step(self, step: int) -> None:
        self.timeline.before_step(step)

    def step(self, batch: Batch | None) -> float:
        import torch

        hvd = self.hvd
        t_start = time.time()
        own_tokens = float(batch.loss_tokens) if batch is not None else 0.0
        tokens = torch.tensor([own_tokens], dtype=torch.float64)
        handle = hvd.allreduce_async(tokens, op=hvd.Sum, name="hvdscale.tokens")  # hvd:
        if batch is None:
            return self._idle_step(handle)
        numerator = float(self.size) if self.op == hvd.Average else 1.0
        t_bwd = [0.0]

        def scale() -> float:
            with self.communicating():
                factor = numerator / float(hvd.synchronize(handle))  # hvd:
            t_bwd[0] = time.time()  # backward starts as soon as this returns
            return factor

        self.adapter.zero_grad()
        loss = self.adapter.forward_backward(batch, scale)
        t_bwd_end = time.time()
        self._update()
        self.timeline.mark(start=t_start, backward_start=t_bwd[0], backward_end=t_bwd_end,
                           end=time.time())
        return loss

    def _allreduce_flat(self) -> None:
        """``after-backward``: the flat gradient buffer in one (grouped) request, in place."""
        hvd = self.hvd
        pairs = [self.compression.compress(t) for t in self.slices]
        wire = [w for w, _ in pairs]
        if len(wire) == 1:
            out = [hvd.allreduce_(wire[0], op=self.op, name="hvdscale.grads")]  # hvd:
        else:
            out = hvd.grouped_allreduce_(wire, op=self.op, name="hvdscale.grads")  # hvd:
        if self.cfg.compression != "none":
            for view, o, (_, ctx) in zip(self.slices, out, pairs, strict=True):
                view.copy_(self.compression.decompress(o, ctx))

    def _update(self) -> None:
        """Wait for (or run) the gradient allreduce, then update."""
        with self.communicating():
            if self.cfg.overlap == "after-backward":
                self._allreduce_flat()
            self.optimizer.step()  # hvd: (hooks: DistributedOptimizer waits for the hooks' work)
        if self.cfg.compression != "none":
            # Decompression swaps each .grad's storage (grad.set_) for the decompressed tensor;
            # its values are spent by the step above, so point .grad back into the flat buffer.
            self.adapter.restore_grad_views()

    def _idle_step(self, tokens_handle: Any) -> float:
        """Take part in a step without a batch: zero tokens, zero gradient.

        No backward runs, so no gradient hook fires by itself: with ``hooks`` they are fired
        here, in the optimizer's own per-parameter order, so the requests (single or grouped)
        carry the same names as on ranks that ran backward and every allreduce completes.
        Summing zeros is exact, and the optimizer step that follows is the same on every rank,
        so replicas and optimizer state stay identical.
        """
        with self.communicating():
            total = float(self.hvd.synchronize(tokens_handle))  # hvd:
        self.adapter.zero_grad()
        if total > 0:  # all ranks see the same total: with no batch anywhere, all skip
            if self.cfg.overlap == "hooks":
                for group in self.optimizer.param_groups:
                    for p in group["params"]:
                        if p.requires_grad:
                            self.optimizer._make_hook(p)()  # hvd: as autograd would
            self._update()  # allreduces the zero gradients, then updates
        return 0.0

    def finish(self) -> None:
        self.timeline.finish(self.hvd.rank())

    def info(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name, "op": self.cfg.op, "compression": self.cfg.compression,
            "gpu_operations": gpu_operations(self.hvd, _device_kind(self.adapter)),
            "overlap": self.cfg.overlap, "num_groups": self.cfg.num_groups,
            "optimizer_state_broadcast": self.state_broadcast,
            "integration": ("DistributedOptimizer (gradient hooks)" if self.cfg.overlap == "hooks"
                            else "one allreduce of the flat gradient buffer after backward"),
            "embedding_grads": "dense (nn.Embedding gradients are dense)"}
        out.update(_trace_info(self.cfg, self.timeline))
        return out


class HorovodTF(Strategy):
    """Horovod for the TensorFlow adapter: ``hvd.DistributedGradientTape`` in the train step.

    ``hooks`` (the tape): the tape wrapper is traced into the adapter's train step, so each
    gradient's allreduce is issued as soon as the backward pass produces it, inside the same
    graph call (``num_groups`` groups them). ``after-backward``: the plain tape, then one
    allreduce of all gradients as one flat tensor (``num_groups`` slices: one grouped
    request). The global token count is allreduced first (eagerly; TensorFlow's graph call
    cannot take a value that arrives during its forward pass). A rank without a batch runs the
    same traced step on a one-sentence, two-token batch with loss scale 0: every gradient is an
    exact zero and every allreduce the other ranks issue is matched under the same names, so
    nothing waits and nothing changes.
    """

    name = "horovod"
    adapter: TFAdapter

    def __init__(self, cfg: HorovodConfig) -> None:
        import horovod.tensorflow as hvd  # hvd:

        self.hvd = hvd
        self.cfg = cfg
        self.op = hvd.Sum if cfg.op == "sum" else hvd.Average  # hvd:
        self.size = hvd.size()
        self.compression = hvd.Compression.fp16 if cfg.compression == "fp16" else \
            hvd.Compression.none
        self.timeline = TimelineCapture(hvd, cfg)

    def setup(self, adapter: TFAdapter) -> None:  # type: ignore[override]
        hvd = self.hvd
        super().setup(adapter)
        # Optimizer state is broadcast with the parameters: fresh state is zeros everywhere,
        # but a restored or warm-started optimizer must start identical on every rank too.
        hvd.broadcast_variables(adapter.variables + adapter.optimizer_variables,  # hvd:
                                root_rank=0)
        dense = self.cfg.embedding_grads == "dense"
        if self.cfg.overlap == "hooks":
            adapter.set_tape_wrapper(lambda tape: hvd.DistributedGradientTape(  # hvd:
                tape, op=self.op, compression=self.compression, sparse_as_dense=dense,
                num_groups=self.cfg.num_groups))
        from hvdscale.core.data import collate

        sent = np.array([4, 4], dtype=np.int64)  # the first non-special token id, twice
        self._zero_batch = collate([sent], None if adapter.kind == "lm" else [sent],
                                   adapter.kind)

    def _reduce_flat(self, flat: Any) -> Any:
        """``after-backward``: the flat gradient tensor in one (grouped) request (traced)."""
        import tensorflow as tf

        hvd, n = self.hvd, max(1, min(self.cfg.num_groups, self.adapter.num_params))
        if n == 1:
            return hvd.allreduce(flat, op=self.op, compression=self.compression,  # hvd:
                                 name="hvdscale.grads")
        total = self.adapter.num_params
        sizes = [total // n + (1 if i < total % n else 0) for i in range(n)]
        parts = hvd.grouped_allreduce(tf.split(flat, sizes), op=self.op,  # hvd:
                                      compression=self.compression, name="hvdscale.grads")
        return tf.concat(parts, 0)

    def _global_tokens(self, own: float) -> float:
        import tensorflow as tf

        with self.communicating():
            total = self.hvd.allreduce(tf.constant([own], tf.float64), op=self.hvd.Sum,  # hvd:
                                       name="hvdscale.tokens")
            return float(total.numpy()[0])

    def trace_plan(self, window_steps: int, endless: bool) -> int:
        return self.timeline.plan(window_steps, endless)

    def before_step(self, step: int) -> None:
        self.timeline.before_step(step)

    def step(self, batch: Batch | None) -> float:
        t_start = time.time()
        total = self._global_tokens(float(batch.loss_tokens) if batch is not None else 0.0)
        if total == 0:  # no rank has a batch: no update, as one process would do
            return 0.0
        numerator = float(self.size) if self.cfg.op == "average" else 1.0
        loss = 0.0
        self.adapter.zero_grad()
        t_bwd = time.time()  # forward and backward are one graph call here
        if batch is None:
            self.adapter.forward_backward(self._zero_batch, 0.0)  # zeros, same allreduces
        else:
            loss = self.adapter.forward_backward(batch, numerator / total)
        t_bwd_end = time.time()
        if self.cfg.overlap == "after-backward":
            with self.communicating():
                self.adapter.reduce_grads(self._reduce_flat)
        self.adapter.step()
        if batch is not None:
            self.timeline.mark(start=t_start, backward_start=t_bwd, backward_end=t_bwd_end,
                               end=time.time())
        return loss

    def finish(self) -> None:
        self.timeline.finish(self.hvd.rank())

    def info(self) -> dict[str, Any]:
        hooks = self.cfg.overlap == "hooks"
        out: dict[str, Any] = {
            "name": self.name, "op": self.cfg.op, "compression": self.cfg.compression,
            "gpu_operations": gpu_operations(self.hvd, _device_kind(self.adapter)),
            "embedding_grads": self.cfg.embedding_grads, "overlap": self.cfg.overlap,
            "num_groups": self.cfg.num_groups,
            "integration": ("DistributedGradientTape in a tf.function" if hooks
                            else "one allreduce of the flat gradients after the train step"),
            "compute_includes_allreduce": hooks}
        out.update(_trace_info(self.cfg, self.timeline))
        return out


def _trace_info(cfg: HorovodConfig, timeline: TimelineCapture) -> dict[str, Any]:
    """The timeline summary and the parsed autotune log, for a strategy's record."""
    out: dict[str, Any] = {}
    if cfg.timeline:
        out["timeline"] = {"file": cfg.timeline, "steps": cfg.timeline_steps,
                           "summary": timeline.summary}
    if cfg.autotune and cfg.autotune_log:
        from hvdscale.records.timeline import read_autotune_log

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


HOROVOD_STRATEGIES: dict[str, type[Strategy]] = {"torch": HorovodTorch, "tf": HorovodTF}
"""Horovod's integration per framework (``make_strategy`` picks by ``framework``)."""
