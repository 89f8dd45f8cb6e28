"""Which rows of the embedding tables a batch touches, for every framework's adapter.

Each embedding table looks up one batch field (``hvdscale.models.EMBEDDING_INPUTS`` for the
shipped models, the module's ``EMBEDDINGS`` for a custom one), so the tables and a batch's
touched rows follow from the flat-buffer layout and the batch alone; the adapters expose them
through the protocol's ``embedding_tables`` and ``touched_rows``. Row ids come from the token
ids (padding id 0 included: its row's gradient is zero, an extra row is harmless), the same set
as the ids of TensorFlow's IndexedSlices gradients and of PyTorch's sparse embedding gradients.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from hvdscale.corpora.corpus import Batch
from hvdscale.strategies.sparse_rows import EmbeddingTable


class EmbeddingRows:
    """The embedding tables ``inputs`` names, laid out as ``sizes`` (flat-buffer order).

    Args:
        inputs: each table's parameter name -> the batch field whose ids it looks up.
        sizes: (name, element count) of each parameter tensor, in flat-buffer order.
        rows: each batch field's vocabulary size (a table's rows; its width follows).
    """

    def __init__(self, inputs: Mapping[str, str], sizes: list[tuple[str, int]],
                 rows: Mapping[str, int]) -> None:
        self.tables: list[EmbeddingTable] = []
        self.fields: list[str] = []
        off = 0
        for name, n in sizes:
            if name in inputs:
                r = rows[inputs[name]]
                self.tables.append(EmbeddingTable(name, off, r, n // r))
                self.fields.append(inputs[name])
            off += n

    def touched(self, batch: Batch) -> list[np.ndarray]:
        """Sorted unique row ids per table that ``batch`` looks up (int64)."""
        return [np.unique(np.asarray(getattr(batch, f), dtype=np.int64)) for f in self.fields]
