"""Horovod's PyTorch integration: the strategy (``HorovodTorch``, ``hvd.DistributedOptimizer``
or one allreduce of the flat gradient buffer) and the harness world's collectives (``HOROVOD``).

Horovod itself is imported only when a Horovod strategy or world is made, so PyTorch runs of
other strategies never need it. The framework-independent parts (settings, timeline, record
facts, the token-weighted scaling) are ``hvdscale.strategies.horovod``. The global token count
is allreduced asynchronously, overlapping the forward.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from hvdscale.config import HorovodConfig
from hvdscale.corpora.corpus import Batch
from hvdscale.frameworks.torch.adapter import TorchAdapter
from hvdscale.frameworks.torch.sparse import SparseEmbeddingGrads
from hvdscale.strategies.horovod import HorovodBase


class TorchCollectives:
    """PyTorch's Horovod as the harness's world uses it (``core.world.HorovodCollectives``)."""

    module = "horovod.torch"

    def barrier(self) -> None:
        import horovod.torch as hvd  # hvd:

        hvd.barrier()  # hvd:

    def allreduce_sum(self, values: np.ndarray, name: str) -> np.ndarray:
        import horovod.torch as hvd  # hvd:

        return hvd.allreduce(torch.from_numpy(values), op=hvd.Sum, name=name).numpy()  # hvd:

    def allreduce_op(self, nbytes: int, name: str) -> Callable[[], object]:
        import horovod.torch as hvd  # hvd:

        buf = torch.from_numpy(np.ones(nbytes // 4, dtype=np.float32))
        return lambda: hvd.allreduce_(buf, op=hvd.Sum, name=name)  # hvd:


HOROVOD = TorchCollectives()
"""This package's ``HOROVOD`` hook (``hvdscale.frameworks.base.Framework``)."""


class HorovodTorch(HorovodBase):
    """Horovod for the PyTorch adapter, with two ways of overlapping communication.

    ``hooks``: ``hvd.DistributedOptimizer`` allreduces each gradient from its backward hook
    (grouped into ``num_groups`` requests if set). ``after-backward``: one allreduce (one
    grouped request of ``num_groups`` slices) of the adapter's flat gradient buffer after
    backward, then the plain optimizer step.
    """

    adapter: TorchAdapter

    def __init__(self, cfg: HorovodConfig) -> None:
        import horovod.torch as hvd  # hvd:

        super().__init__(hvd, cfg)
        self.state_broadcast = False

    def setup(self, adapter: TorchAdapter) -> None:  # type: ignore[override]
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
        self.sparse: SparseEmbeddingGrads | None = None
        if self.cfg.embedding_grads == "gathered":
            self.sparse = SparseEmbeddingGrads(adapter)
            self.sparse.check(self.cfg.compression, self.cfg.overlap, self.cfg.num_groups)
        if self.cfg.overlap == "hooks":
            self.optimizer = hvd.DistributedOptimizer(  # hvd:
                opt, named_parameters=model.named_parameters(), compression=self.compression,
                op=self.op, groups=self.cfg.num_groups or None)
        else:
            self.optimizer = opt
            # Views into the flat buffer: the allreduce works in place, no copies.
            n = max(1, min(self.cfg.num_groups, adapter.num_params))
            self.slices = list(torch.tensor_split(adapter.flat_grads, n)) if self.sparse is None \
                else self.sparse.dense_slices(n)  # gathered: the embeddings go apart
        self.size = hvd.size()

    def step(self, batch: Batch | None) -> float:
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
        if self.sparse is not None:
            self.sparse.clear()
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
                handles = self.sparse.reduce_async(self.hvd, self.op) if self.sparse else None
                self._allreduce_flat()
                if self.sparse is not None:
                    self.sparse.finish(handles)
            elif self.sparse is not None:
                # gathered: the reduced sparse rows go into the flat views before the step
                self.optimizer.synchronize()  # hvd:
                self.sparse.finish()
                with self.optimizer.skip_synchronize():  # hvd:
                    self.optimizer.step()
                return
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
        if self.sparse is not None:
            self.sparse.empty()  # zero rows to gather, under the same names
        if total > 0:  # all ranks see the same total: with no batch anywhere, all skip
            if self.cfg.overlap == "hooks":
                for group in self.optimizer.param_groups:
                    for p in group["params"]:
                        if p.requires_grad:
                            self.optimizer._make_hook(p)()  # hvd: as autograd would
            self._update()  # allreduces the zero gradients, then updates
        return 0.0

    def integration_info(self) -> dict[str, Any]:
        return {
            "overlap": self.cfg.overlap, "num_groups": self.cfg.num_groups,
            "optimizer_state_broadcast": self.state_broadcast,
            "integration": ("DistributedOptimizer (gradient hooks)" if self.cfg.overlap == "hooks"
                            else "one allreduce of the flat gradient buffer after backward"),
            "embedding_grads": self.cfg.embedding_grads}
