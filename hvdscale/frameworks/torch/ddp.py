"""PyTorch's own data parallelism: ``torch.nn.parallel.DistributedDataParallel`` as a strategy
(``strategy.name=ddp``), started from the ranks the launcher made, never touching Horovod.

torch.distributed runs gloo on CPU (NCCL when the rank computes on a GPU); its rendezvous
address and port are agreed over the harness's MPI world, or given by torchrun's store
(``hvdscale.core.rendezvous``).

Token weighting: DDP averages gradients over the ranks. Each rank scales its summed token loss
by ``size / global_tokens`` (the global token count allreduced asynchronously, overlapping the
forward, on a group of its own), so DDP's average is the sum of the ranks' gradients divided by
the global token count: the exact update of the union of the batches. Scaling the loss rather
than registering a summing communication hook keeps DDP's own hooks (fp16, bf16, PowerSGD)
usable unchanged.

Idle ranks (epoch mode, ``strategy.ddp.idle``): ``zero`` runs the step on a two-token
sentence with loss scale 0 (exact zero gradients, the same bucket allreduces, the same
optimizer step, so replicas and optimizer state stay identical); ``join`` uses DDP's join
context (``hvdscale.frameworks.torch.ddp_join``).
"""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from hvdscale.config import DDPConfig, StrategyConfig
from hvdscale.core import rendezvous
from hvdscale.core.gpu_sharing import ddp_backend, gather_groups
from hvdscale.core.world import World
from hvdscale.corpora.corpus import Batch, collate
from hvdscale.errors import ConfigError, HvdscaleError
from hvdscale.frameworks.torch.adapter import TorchAdapter
from hvdscale.frameworks.torch.ddp_join import JoinControl
from hvdscale.strategies.base import Strategy


def make_native_strategy(cfg: StrategyConfig, world: object) -> Strategy:
    """This package's ``make_native_strategy`` hook: DDP with ``cfg.ddp``'s settings."""
    return DDPStrategy(cfg.ddp, world)  # type: ignore[arg-type]


def _comm_hook(ddp: DistributedDataParallel, cfg: DDPConfig) -> Any:
    """Register ``cfg.comm_hook`` on ``ddp``; returns PowerSGD's state (None otherwise)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    if cfg.comm_hook == "fp16":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)  # hvd:
    elif cfg.comm_hook == "bf16":
        ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)  # hvd:
    elif cfg.comm_hook == "powersgd":
        state = powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=cfg.powersgd_rank,
            start_powerSGD_iter=cfg.powersgd_start_iter, use_error_feedback=True,
            warm_start=True, random_seed=0)
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)  # hvd:
        return state
    return None


PEER_GRACE_S = 10.0
"""How long a rank whose gloo peer closed the connection waits to be ended by the launcher
before reporting it: the rank that failed first is then the one whose error is shown."""
_PEER_GONE = ("Connection closed by peer", "Connection reset by peer", "Broken pipe")


@contextmanager
def peer_failures(rank: int) -> Iterator[None]:
    """Turn gloo's "connection closed by peer" (another rank died or failed) into a short
    error, after a grace period in which ``mpirun`` ends this rank with the job, so the error
    shown once is the failed rank's own; anything else passes through unchanged."""
    try:
        yield
    except RuntimeError as e:
        if not any(m in str(e) for m in _PEER_GONE):
            raise
        time.sleep(PEER_GRACE_S)
        raise HvdscaleError(f"rank {rank}: another rank left the job (torch.distributed: "
                            f"{str(e).splitlines()[0][:200]})") from None


class DDPStrategy(Strategy):
    """DistributedDataParallel over the adapter's model; see the module docstring."""

    name = "ddp"
    adapter: TorchAdapter

    def __init__(self, cfg: DDPConfig, world: World) -> None:
        self.cfg = cfg
        self.world = world
        self.ddp: DistributedDataParallel | None = None
        self.join = JoinControl(enabled=cfg.idle == "join")
        self._zero_batch: Batch | None = None
        self.rendezvous: rendezvous.Rendezvous | None = None
        self.backend: str | None = None
        self.backend_reason = ""
        self.step_times: list[tuple[float, float, float, float]] = []
        """(start, backward start, backward end, end) of each step (the breakdown's shape)."""

    def setup(self, adapter: TorchAdapter) -> None:  # type: ignore[override]
        super().setup(adapter)
        # NCCL refuses two ranks on one GPU; gloo reduces CUDA tensors (core.gpu_sharing).
        groups = gather_groups(self.world, adapter.placement)
        self.backend, self.backend_reason = ddp_backend(adapter.device.type, groups)
        backend = self.backend
        if self.cfg.comm_hook == "bf16" and backend != "nccl":
            # torch's bf16 hook needs NCCL >= 2.10 (or XCCL); every rank refuses alike.
            raise ConfigError("strategy.ddp.comm_hook=bf16 needs a GPU run (NCCL); on CPU "
                              "(gloo) use fp16 or powersgd")
        timeout = timedelta(seconds=self.cfg.timeout_s)
        store = self._store(timeout)
        with rendezvous.interface(self.rendezvous):
            dist.init_process_group(backend, store=store,  # hvd:
                                    rank=self.world.rank, world_size=self.world.size,
                                    timeout=timeout)
            # The token counts travel on a group of their own: their allreduce overlaps the
            # forward, and a joined rank shadows it apart from the gradients' collectives.
            self.tokens_group = dist.new_group(backend="gloo", timeout=timeout)  # hvd:
        try:
            with peer_failures(self.world.rank):
                self._wrap(adapter)
        except BaseException:
            dist.destroy_process_group()  # hvd: no half-made group outlives a failed set-up
            raise

    def _store(self, timeout: timedelta) -> dist.Store:
        """torch.distributed's TCPStore: rank 0 binds it first (the port is published only once
        it listens, so no other job can take it in between), the others connect to it. The
        store listens on every interface (TCPStore has no bind address): see docs/security.md.
        """
        made: list[dist.TCPStore] = []

        def listen(addr: str, port: int) -> int:
            made.append(dist.TCPStore(addr, port, self.world.size, is_master=True,  # hvd:
                                      timeout=timeout, wait_for_workers=False))
            return int(made[0].port)

        try:
            self.rendezvous = rv = rendezvous.agree(self.world, listen)
        except RuntimeError as e:
            raise HvdscaleError(f"strategy.name=ddp: {e}") from None
        if made:
            return made[0]
        if rv.store is not None:  # the launcher's store (torchrun's), already joined
            return rv.store
        return dist.TCPStore(rv.addr, rv.port, self.world.size, is_master=False,  # hvd:
                             timeout=timeout)

    def _wrap(self, adapter: TorchAdapter) -> None:
        """DDP around the adapter's model, with the configured hook and idle handling."""
        cfg = self.cfg
        self.ddp = DistributedDataParallel(  # hvd: broadcasts rank 0's parameters
            adapter.model, device_ids=[adapter.device.index] if self.backend == "nccl" else None,
            bucket_cap_mb=cfg.bucket_cap_mb, gradient_as_bucket_view=cfg.gradient_as_bucket_view,
            static_graph=cfg.static_graph, find_unused_parameters=cfg.find_unused_parameters,
            )
        if cfg.gradient_as_bucket_view:
            adapter.grad_views = False  # .grad now lives in DDP's buckets
        self.powersgd = _comm_hook(self.ddp, cfg)
        adapter.forward_model = self.ddp
        self.size = self.world.size
        self.join.attach(self.ddp, self.tokens_group)
        sent = np.array([4, 4], dtype=np.int64)  # the first non-special token id, twice
        self._zero_batch = collate([sent], None if adapter.kind == "lm" else [sent], adapter.kind)

    def trace_plan(self, window_steps: int, endless: bool) -> int:
        # DDP has no timeline of its own to trace; the join context needs the window's end.
        self.join.plan(window_steps, endless)
        return 0

    def before_step(self, step: int) -> None:
        self.join.before_step(step)

    def _tokens(self, own: float) -> Any:
        """Start the global token count's allreduce; returns (tensor, work)."""
        t = torch.tensor([own], dtype=torch.float64)
        return t, dist.all_reduce(t, group=self.tokens_group, async_op=True)  # hvd:

    def step(self, batch: Batch | None) -> float:
        with peer_failures(self.world.rank):
            self.join.begin_step()
            if batch is None:
                return self._idle_step()
            return self._step(batch)

    def _step(self, batch: Batch) -> float:
        """A step with a batch: the token count overlaps the forward, DDP's buckets the
        backward."""
        t_start = time.time()
        self.join.notify()
        tokens, work = self._tokens(float(batch.loss_tokens))
        t_bwd = [0.0]

        def scale() -> float:
            with self.communicating():
                work.wait()  # hvd:
            t_bwd[0] = time.time()
            # The backward computes and waits for the bucket allreduces in one call.
            self.phase = "overlapped"
            return self.size / float(tokens[0])

        self.adapter.zero_grad()
        try:
            # hvd: DDP's backward allreduces each bucket as it fills; returns once all are done
            loss = self.adapter.forward_backward(batch, scale)
        finally:
            self.phase = "compute"
        t_bwd_end = time.time()
        self.adapter.step()
        self.step_times.append((t_start, t_bwd[0], t_bwd_end, time.time()))
        with self.joined():
            self.join.after_step()  # hvd: the last measured step leaves the join context
        return loss

    @contextmanager
    def joined(self) -> Iterator[None]:
        """Phase ``joined`` while in the join context's exit: this rank waits, for as long as
        the others still train, inside one step; the step watchdog leaves that wait alone."""
        self.phase = "joined"
        try:
            yield
        finally:
            self.phase = "compute"

    def _idle_step(self) -> float:
        """No batch on this rank: DDP's join, or a zero contribution to the same step."""
        if self.join.ctx is not None:
            if self.join.active:  # the first step without a batch; later ones have no work
                with self.joined():
                    self.join.leave()  # hvd: shadows the others' collectives until all leave
            return 0.0
        tokens, work = self._tokens(0.0)
        with self.communicating():
            work.wait()  # hvd:
        if float(tokens[0]) > 0:  # every rank sees the same total: no batch anywhere, all skip
            assert self._zero_batch is not None
            self.adapter.zero_grad()
            # hvd: loss scale 0: exact zero gradients through the same bucket allreduces
            self.adapter.forward_backward(self._zero_batch, 0.0)
            self.adapter.step()
        return 0.0

    def ddp_logging(self) -> dict[str, Any]:
        """DDP's own logging data (bucket sizes, sampled forward/backward/comm times)."""
        if self.ddp is None:
            return {}
        data = self.ddp._get_ddp_logging_data()
        return {k: v for k, v in data.items() if isinstance(v, int | float | str)}

    def first_bucket_mb(self) -> float | None:
        """The first bucket's cap in MiB as DDP made it: with ``bucket_cap_mb`` given (always,
        here) torch 2.13 caps the first bucket at the same size; its 1 MiB first bucket applies
        only when ``bucket_cap_mb`` is left unset. None where the torch build does not say."""
        bucket_config = getattr(self.ddp, "_bucket_config", None)
        cap = getattr(bucket_config, "first_bucket_bytes_cap", None)
        return None if cap is None else cap / 2**20

    def info(self) -> dict[str, Any]:
        log = self.ddp_logging()
        rv = self.rendezvous
        return {
            "name": self.name, **{k: getattr(self.cfg, k) for k in self.cfg.__dataclass_fields__},
            "first_bucket_mb": self.first_bucket_mb(),
            "backend": self.backend, "backend_reason": self.backend_reason,
            "token_weighting": "loss x size/global_tokens, DDP averages",
            "rendezvous": None if rv is None else {"addr": rv.addr, "port": rv.port,
                                                   "ifname": rv.ifname, "source": rv.source},
            "join": self.join.info(),
            # After the first step DDP rebuilds its buckets in the order gradients were ready.
            "bucket_sizes": log.get("rebuilt_bucket_sizes") or log.get("bucket_sizes"),
            "ddp_logging": log,
            "step_times": self.step_times[-50:],
        }

    def finish(self) -> None:
        self.join.finish()
        if dist.is_initialized():
            dist.destroy_process_group()  # hvd:

    def close(self) -> None:
        """Free DDP so the next point of a shared launch starts clean.

        The order matters: destroying the process group only unregisters it, and DDP's C++
        reducer still holds it. Were the reducer to drop the group's last reference, gloo's
        destructor would join its worker threads with the GIL held while a worker waits for
        the GIL to free a finished collective's tensor: a deadlock (pytorch/pytorch#56297; the
        next point's first collective then waits for ever on the other rank). So the Python
        handles of both groups are held until DDP is gone, and dropped last: their own
        deallocation releases the GIL.
        """
        ddp = self.ddp
        if ddp is None:
            return
        groups = [ddp.process_group, getattr(self, "tokens_group", None)]
        if self.adapter.forward_model is ddp:
            self.adapter.forward_model = self.adapter.model
        self.join.ctx = self.join.tokens = self.join.ddp = None
        self.ddp = self.powersgd = self.tokens_group = None
        alive = weakref.ref(ddp)
        del ddp
        if alive() is not None:  # DDP holds no cycles; a collection only as a fallback
            gc.collect()
        groups.clear()  # the groups' destructors run here, the GIL released
