"""PyTorch embeddings with sparse gradients for Horovod's ``embedding_grads=gathered``.

The adapter's gradients are views of one flat buffer; autograd adds a sparse embedding
gradient into an existing dense ``.grad`` densely, so Horovod would never see it sparse. Here the
model's ``nn.Embedding`` modules are switched to sparse gradients (``sparse=True``, an attribute
their forward reads) and their ``.grad`` is cleared before each backward: autograd then hands
Horovod a sparse tensor (one row per looked-up token), which Horovod reduces by allgathering its
indices and values (``sparse_allreduce_async``; ``op=average`` divides the values by the size,
so the token-weighted scale stays exact). Once reduced, the rows are added into the gradient's
flat view (``index_add_``: a row gathered from several tokens or ranks is summed) and every
``.grad`` points back into the flat buffer, so the optimizer's update is the dense, exact one.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from hvdscale.errors import HvdscaleError

SPARSE_NAME = "hvdscale.sparse"
"""Name prefix of the sparse reductions (``SPARSE_NAME.<i>``; Horovod adds ``.indices`` and
``.values`` to its two allgathers): the tests tell them from other allgathers by it."""


class SparseEmbeddingGrads:
    """The adapter's embeddings, switched to sparse gradients (see the module docstring).

    Args:
        adapter: the PyTorch adapter (its ``model``, ``params``, ``flat_grads``).
    """

    def __init__(self, adapter: Any) -> None:
        self.adapter = adapter
        # The declared tables only (all of a shipped model's embeddings; a custom model's
        # EMBEDDINGS): an undeclared nn.Embedding (positions, say) stays dense.
        declared = {t.name for t in adapter.embedding_tables()}
        weights = {id(p) for n, p in adapter.model.named_parameters() if n in declared}
        modules = [m for m in adapter.model.modules()
                   if isinstance(m, nn.Embedding) and id(m.weight) in weights]
        for m in modules:
            m.sparse = True  # read by nn.Embedding.forward: the weight's gradient is sparse
        mine = {id(m.weight) for m in modules}
        self.params: list[nn.Parameter] = []
        self.views: list[torch.Tensor] = []
        self.dense: list[tuple[int, int]] = []  # flat ranges of every other parameter
        off = 0
        for p in adapter.params:
            k = p.numel()
            if id(p) in mine:
                self.params.append(p)
                self.views.append(adapter.flat_grads[off:off + k].view_as(p))
            elif self.dense and self.dense[-1][1] == off:
                self.dense[-1] = (self.dense[-1][0], off + k)
            else:
                self.dense.append((off, off + k))
            off += k

    def check(self, compression: str, overlap: str, num_groups: int) -> None:
        """Settings Horovod's sparse path cannot take: one clear error."""
        if compression != "none":
            raise HvdscaleError("strategy.horovod.embedding_grads=gathered with PyTorch needs "
                                f"strategy.horovod.compression=none (got {compression})")
        if overlap == "hooks" and num_groups:
            raise HvdscaleError("strategy.horovod.embedding_grads=gathered with PyTorch and "
                                "overlap=hooks needs num_groups=0: Horovod cannot group a "
                                f"sparse gradient (got {num_groups})")

    def clear(self) -> None:
        """Before a backward: no ``.grad``, so autograd sets a sparse one."""
        for p in self.params:
            p.grad = None

    def empty(self) -> None:
        """A rank without a batch: empty sparse gradients (zero rows to gather)."""
        for p in self.params:
            p.grad = torch.sparse_coo_tensor(torch.zeros((1, 0), dtype=torch.long),
                                             torch.zeros((0, p.shape[1]), dtype=p.dtype),
                                             p.shape)

    def dense_slices(self, n: int) -> list[torch.Tensor]:
        """The flat gradient buffer without the embeddings, in ``n`` views (or fewer)."""
        flat = self.adapter.flat_grads
        out: list[torch.Tensor] = []
        for lo, hi in self.dense:
            out += list(torch.tensor_split(flat[lo:hi], max(1, min(n, hi - lo))))
        return out

    def reduce_async(self, hvd: Any, op: Any) -> list[Any]:
        """Start Horovod's sparse reduction (allgather of indices and values) of each
        embedding gradient; returns the handles for ``finish``."""
        from horovod.torch.mpi_ops import sparse_allreduce_async  # hvd:

        return [sparse_allreduce_async(p.grad.coalesce(), name=f"{SPARSE_NAME}.{i}",  # hvd:
                                       op=op) for i, p in enumerate(self.params)]

    def finish(self, handles: list[Any] | None = None) -> None:
        """Add the reduced rows into the flat gradient views and restore every view."""
        for i, (p, view) in enumerate(zip(self.params, self.views, strict=True)):
            g = handles[i]() if handles is not None else p.grad  # hvd: waits for the gather
            view.zero_()
            if g is not None and g.is_sparse:
                view.index_add_(0, g._indices()[0], g._values())
            elif g is not None:
                view.copy_(g)
        self.adapter.restore_grad_views()
