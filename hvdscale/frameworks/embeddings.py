"""Which rows of the embedding tables a batch touches, for every framework's adapter.

Both frameworks' models share parameter names and layout, and each embedding table looks up
one batch field (``hvdscale.models.EMBEDDING_INPUTS``), so the tables and a batch's touched rows
follow from the flat-buffer layout and the batch alone; the adapters expose them through the
protocol's ``embedding_tables`` and ``touched_rows``. Row ids come from the token ids (padding
id 0 included: its row's gradient is zero, an extra row is harmless), the same set as the ids
of TensorFlow's IndexedSlices gradients and of PyTorch's sparse embedding gradients.
"""

from __future__ import annotations

import numpy as np

from hvdscale.core.data import Batch
from hvdscale.models import EMBEDDING_INPUTS
from hvdscale.strategies.sparse_rows import EmbeddingTable


class EmbeddingRows:
    """The embedding tables of a model of ``kind`` laid out as ``sizes`` (flat-buffer order).

    Args:
        kind: the model kind (``nmt``, ``lm``).
        sizes: (name, element count) of each parameter tensor, in flat-buffer order.
        embed_dim: the tables' width.
    """

    def __init__(self, kind: str, sizes: list[tuple[str, int]], embed_dim: int) -> None:
        inputs = EMBEDDING_INPUTS.get(kind, {})
        self.tables: list[EmbeddingTable] = []
        self.fields: list[str] = []
        off = 0
        for name, n in sizes:
            if name in inputs:
                self.tables.append(EmbeddingTable(name, off, n // embed_dim, embed_dim))
                self.fields.append(inputs[name])
            off += n

    def touched(self, batch: Batch) -> list[np.ndarray]:
        """Sorted unique row ids per table that ``batch`` looks up (int64)."""
        return [np.unique(np.asarray(getattr(batch, f), dtype=np.int64)) for f in self.fields]
