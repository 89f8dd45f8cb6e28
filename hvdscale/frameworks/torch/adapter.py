"""PyTorch adapter (``base.Adapter``): the model, its optimizer, and flat views of both.

The flat buffers share memory with the model (every parameter and ``.grad`` is a view into one
contiguous tensor), so on CPU ``params_buffer``/``grads_buffer`` cost nothing and
``params_changed`` has nothing to do. On a GPU (or on CPU with staging forced, so the path is
tested without one) the numpy buffers are (pinned) host copies: ``params_buffer``/
``grads_buffer`` copy device to host, ``params_changed`` host to device, and the seconds spent
are counted in ``copy_s``, apart from any network time. Horovod's PyTorch integration
(``HorovodTorch`` in this package's ``horovod`` module) also uses ``model``, ``optimizer`` and
``restore_grad_views``, documented below.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from hvdscale.config import ModelConfig, OptimConfig
from hvdscale.core.device import CPU, Placement
from hvdscale.corpora.corpus import Batch
from hvdscale.errors import HvdscaleError
from hvdscale.frameworks.embeddings import EmbeddingRows
from hvdscale.frameworks.torch.build import build, probe
from hvdscale.frameworks.torch.optimizer import ShardOptimizer, make_optimizer
from hvdscale.frameworks.torch.precision import autocast, loss_scale, loss_scaled, scaler_state
from hvdscale.models import ModelSizes
from hvdscale.models.custom import check_embeddings
from hvdscale.strategies.base import Scale
from hvdscale.strategies.sparse_rows import EmbeddingTable

FRAMEWORK = "torch"


class TorchAdapter:
    """A model, its optimizer and flat views of its parameters and gradients.

    Attributes used by Horovod's PyTorch integration only: ``model`` (the ``nn.Module``, for
    ``named_parameters``/``state_dict``), ``optimizer`` (wrapped in ``hvd.DistributedOptimizer``)
    and ``restore_grad_views``.
    """

    framework = FRAMEWORK

    def __init__(self, model_cfg: ModelConfig, optim_cfg: OptimConfig, src_vocab: int,
                 tgt_vocab: int, placement: Placement = CPU, precision: str = "fp32") -> None:
        torch.manual_seed(model_cfg.seed)
        self.precision = precision
        """``RunConfig.precision``: what the forward pass computes in (hvdscale.frameworks.torch
        .precision); parameters, gradients and the optimizer stay fp32."""
        self.rnn_impl = model_cfg.rnn_impl
        self.compile: dict[str, Any] | None = None
        """``precompile``'s timings (None until it ran for a compiled loop)."""
        self.placement = placement
        self.device = torch.device(placement.name)
        self._cuda = placement.kind == "cuda"
        self.model, tables = build(model_cfg,
                                   ModelSizes.from_config(model_cfg, src_vocab, tgt_vocab))
        # Initialised on the CPU from the seed, then moved: the same initial values on any device.
        self.model.to(self.device)
        if model_cfg.kind == "custom":  # the shipped models keep the contract by construction
            probe(model_cfg, self.model, self.device)
        self.kind = model_cfg.data_kind
        """The batches the model takes (``nmt`` or ``lm``)."""
        self.forward_model: torch.nn.Module = self.model
        """What forward runs through: the model, or a wrapper of it (DDP's)."""
        self.grad_views = True
        """Whether every ``.grad`` is a view of ``flat_grads`` (False once DDP's
        gradient_as_bucket_view makes them views of its buckets instead)."""
        self.optim_cfg = optim_cfg
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self._flatten()
        self.copy_s = 0.0
        """Seconds spent copying the staged flat buffers between host and device."""
        self.optimizer = loss_scaled(make_optimizer(self.params, optim_cfg), precision)
        rows = {"src": src_vocab, "tgt_in": tgt_vocab}
        if model_cfg.kind == "custom":
            check_embeddings(model_cfg, tables, self.param_shapes(), rows)
        self.embeddings = EmbeddingRows(tables, self.tensor_sizes(), rows)
        self.compute_s = 0.0
        """Seconds spent in forward and backward so far (waits inside ``scale`` excluded)."""

    def _flatten(self) -> None:
        """Lay the parameters and gradients out in two flat buffers, each tensor a view into
        them, so communication works on one contiguous array (as DDP's
        gradient_as_bucket_view); staged placements get host buffers of the same size."""
        n = sum(p.numel() for p in self.params)
        self.flat_params = torch.zeros(n, dtype=torch.float32, device=self.device)
        self.flat_grads = torch.zeros(n, dtype=torch.float32, device=self.device)
        self._host_params: torch.Tensor | None = None
        self._host_grads: torch.Tensor | None = None
        if self.placement.stage:
            # Pinned host memory lets the copies run by DMA; pinning needs CUDA, so a CPU run
            # with staging forced (tests) stages through ordinary host tensors.
            self._host_params = torch.zeros(n, dtype=torch.float32, pin_memory=self._cuda)
            self._host_grads = torch.zeros(n, dtype=torch.float32, pin_memory=self._cuda)
        off = 0
        with torch.no_grad():
            for p in self.params:
                k = p.numel()
                self.flat_params[off : off + k].copy_(p.reshape(-1))
                p.data = self.flat_params[off : off + k].view_as(p)
                p.grad = self.flat_grads[off : off + k].view_as(p)
                off += k

    @property
    def num_params(self) -> int:
        return int(self.flat_params.numel())

    def tensor_sizes(self) -> list[tuple[str, int]]:
        """(name, element count) of each parameter tensor, in flat-buffer order."""
        names = {id(p): n for n, p in self.model.named_parameters()}
        return [(names[id(p)], p.numel()) for p in self.params]

    def param_shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        """(name, shape) of each parameter tensor, in flat-buffer order."""
        names = {id(p): n for n, p in self.model.named_parameters()}
        return [(names[id(p)], tuple(p.shape)) for p in self.params]

    def _to_device(self, a: np.ndarray) -> torch.Tensor:
        t = torch.from_numpy(a)
        if not self._cuda:
            return t
        # Pinned host memory, then an asynchronous copy: the transfer overlaps queued kernels.
        return t.pin_memory().to(self.device, non_blocking=True)

    def tensors(self, batch: Batch) -> dict[str, torch.Tensor | None]:
        """The batch as tensors on the adapter's device, keyed by the models' arguments."""
        dev = self._to_device
        return {"src": dev(batch.src), "src_len": dev(batch.src_len),
                "tgt_in": None if batch.tgt_in is None else dev(batch.tgt_in),
                "tgt_out": dev(batch.tgt_out), "tgt_len": dev(batch.tgt_len)}

    def synchronize(self) -> None:
        """Wait for the work queued on this rank's GPU (nothing to wait for on CPU)."""
        if self._cuda:
            torch.cuda.synchronize(self.device)

    def device_stats(self) -> dict[str, Any]:
        """Placement, staged-copy seconds, and peak GPU memory in MiB (None on CPU)."""
        peak = (torch.cuda.max_memory_allocated(self.device) / 2**20) if self._cuda else None
        return {**self.placement.to_dict(), "copy_s": self.copy_s, "peak_gpu_mem_mb": peak}

    def zero_grad(self) -> None:
        # In place, never set_to_none: the gradients must stay views of flat_grads.
        if not self.grad_views:
            for p in self.params:
                if p.grad is not None:
                    p.grad.zero_()
            return
        self.flat_grads.zero_()

    def forward_backward(self, batch: Batch, scale: Scale) -> float:
        """Backward of ``scale`` x the batch's summed token loss; returns the unscaled loss.

        ``scale`` may be a callable, evaluated between forward and backward, so a strategy can
        overlap the global token count's allreduce with the forward pass. The time of forward
        and backward, without the wait inside ``scale``, is added to ``compute_s``: the rank's
        own work, against which its idle time at the step's synchronisation is measured.
        """
        t0 = time.perf_counter()
        with self._autocast():
            loss, _ = self.forward_model(**self.tensors(batch))
        t1 = time.perf_counter()
        factor = scale() if callable(scale) else scale
        t2 = time.perf_counter()
        # fp16: the loss scale rides on the seed; the optimizer's step takes it out after the
        # reduction (hvdscale.frameworks.torch.precision). Loss in fp32 before scaling.
        (loss.float() * (factor * loss_scale(self.optimizer))).backward()
        if self._cuda:
            # The backward's kernels are this rank's work; only the compute stream is waited
            # on, not Horovod's NCCL stream, whose allreduces overlap the backward.
            torch.cuda.current_stream(self.device).synchronize()
        self.compute_s += (t1 - t0) + (time.perf_counter() - t2)
        self._check_grad_views()
        return float(loss.detach())

    def restore_grad_views(self) -> None:
        """Point every ``.grad`` back into the flat buffer (after code that replaced them)."""
        off = 0
        for p in self.params:
            k = p.numel()
            p.grad = self.flat_grads[off : off + k].view_as(p)
            off += k

    def _check_grad_views(self) -> None:
        if not self.grad_views:
            return
        base = self.flat_grads.data_ptr()
        for p in self.params:
            # A sparse embedding gradient (Horovod's gathered mode) is densified by its owner.
            if p.grad is None or (not p.grad.is_sparse
                                  and p.grad.untyped_storage().data_ptr() != base):
                raise RuntimeError("autograd replaced a gradient view of the flat buffer")

    def train_step(self, batch: Batch, scale: Scale) -> float:
        """``zero_grad``, ``forward_backward`` and ``step`` (``base.Adapter``)."""
        self.zero_grad()
        loss = self.forward_backward(batch, scale)
        self.step()
        return loss

    def loss(self, batch: Batch) -> float:
        """Summed token loss without gradients."""
        # The module itself, never a strategy's wrapper: one rank evaluates, and a wrapper's
        # forward may issue collectives (DDP's, once its join context was built).
        with torch.no_grad(), self._autocast():
            loss, _ = self.model(**self.tensors(batch))
        return float(loss)

    def probe_grad(self, batch: Batch) -> np.ndarray:
        """Gradient of the batch's summed token loss, flat float64 in ``tensor_sizes`` order.

        No side effects: ``autograd.grad`` on the unwrapped module returns the gradients
        without accumulating into ``.grad``, so the hooks Horovod and DDP put on gradient
        accumulation never run and nothing is communicated (gradient noise scale, issue 33).
        """
        with self._autocast():
            loss, _ = self.model(**self.tensors(batch))
        grads = torch.autograd.grad(loss.float(), self.params, allow_unused=True)
        parts = [torch.zeros(p.numel(), dtype=torch.float64) if g is None
                 else (g.to_dense() if g.is_sparse else g).detach().reshape(-1).double().cpu()
                 for p, g in zip(self.params, grads, strict=True)]
        return torch.cat(parts).numpy()

    def step(self) -> None:
        self.optimizer.step()

    def _autocast(self) -> Any:
        return autocast(self.precision, self.device.type)

    def precompile(self, batch: Batch | None) -> dict[str, Any] | None:
        """Compile a ``compiled`` loop before the warm-up, timed apart (None otherwise).

        Two forward+backward passes through the unwrapped module with ``autograd.grad`` (nothing
        accumulates into ``.grad``, so no strategy hook runs and nothing is communicated): the
        first compiles, the second runs compiled; ``compile_s`` is their difference.
        """
        if self.rnn_impl != "compiled" or batch is None:
            return None
        passes = []
        for _ in range(2):
            t = time.perf_counter()
            self.probe_grad(batch)
            self.synchronize()
            passes.append(time.perf_counter() - t)
        self.compile = {"compile_s": passes[0] - passes[1], "first_pass_s": passes[0],
                        "compiled_pass_s": passes[1]}
        return self.compile

    def precision_info(self) -> dict[str, Any]:
        """What the rank computed in: autocast dtype, master weights, gradient dtype, scaler."""
        return {"compute": self.precision, "master_weights": "fp32",
                "grads": str(self.flat_grads.dtype).removeprefix("torch."),
                "loss_scaler": scaler_state(self.optimizer)}

    def _stage_out(self, src: torch.Tensor, host: torch.Tensor) -> np.ndarray:
        t = time.perf_counter()
        host.copy_(src)  # device to pinned host; blocking, so the values are there on return
        self.copy_s += time.perf_counter() - t
        return host.numpy()

    def params_buffer(self) -> np.ndarray:
        """All parameters as one float32 numpy array: the model's own memory on CPU, a staged
        host copy (the same array each call) otherwise."""
        if self._host_params is None:
            return self.flat_params.numpy()
        return self._stage_out(self.flat_params, self._host_params)

    def params_changed(self) -> None:
        """Copy the staged host parameters to the device (nothing to do when not staged)."""
        if self._host_params is None:
            return
        t = time.perf_counter()
        with torch.no_grad():
            self.flat_params.copy_(self._host_params, non_blocking=self._cuda)
        self.synchronize()  # counted as copy time, not as the next step's compute
        self.copy_s += time.perf_counter() - t

    def grads_buffer(self) -> np.ndarray:
        """All gradients as one float32 numpy array: autograd's memory on CPU, a staged host
        copy (the same array each call) otherwise."""
        if self._host_grads is None:
            return self.flat_grads.numpy()
        return self._stage_out(self.flat_grads, self._host_grads)

    def shard_optimizer(self, shard: np.ndarray) -> ShardOptimizer:
        """An optimizer of the run's kind over a flat float32 ``shard`` (updated in place)."""
        return ShardOptimizer(shard, self.optim_cfg)

    def embedding_tables(self) -> list[EmbeddingTable]:
        """The embedding tables in the flat buffers (``base.Adapter``)."""
        return self.embeddings.tables

    def touched_rows(self, batch: Batch) -> list[np.ndarray]:
        """Per embedding table, the rows ``batch`` looks up (``base.Adapter``)."""
        return self.embeddings.touched(batch)

    def fingerprint(self) -> dict[str, float]:
        """Sum and L2 norm of all parameters (float64), to compare runs from records alone."""
        p = self.flat_params.double()
        return {"sum": float(p.sum()), "l2": float(p.norm())}


def make_adapter(model_cfg: ModelConfig, optim_cfg: OptimConfig, src_vocab: int,
                 tgt_vocab: int, placement: Placement = CPU,
                 precision: str = "fp32") -> TorchAdapter:
    """The PyTorch adapter for a run (see ``hvdscale.frameworks.base.Framework``)."""
    return TorchAdapter(model_cfg, optim_cfg, src_vocab, tgt_vocab, placement, precision)


def tensor_sizes(model_cfg: ModelConfig, src_vocab: int, tgt_vocab: int) -> list[tuple[str, int]]:
    """(name, element count) of each trainable parameter tensor, in flat-buffer order (see
    ``hvdscale.frameworks.base.Framework``). Built on the meta device: shapes only, no memory."""
    sizes = ModelSizes.from_config(model_cfg, src_vocab, tgt_vocab)
    try:
        with torch.device("meta"):
            model, _ = build(model_cfg, sizes)
    except HvdscaleError:
        raise
    except Exception:  # a user's builder that cannot build on the meta device: a real build
        model, _ = build(model_cfg, sizes)
    return [(n, p.numel()) for n, p in model.named_parameters() if p.requires_grad]
