"""Embedding tables as rows of the flat parameter buffer: the layout sparse merging works on.

An embedding table is a contiguous ``rows x dim`` block of the flat buffer (row-major, as both
frameworks lay it out). A step touches only the rows of the tokens in its batch; every other
row's gradient is exactly zero, so sending (unique row ids, their summed rows) carries the same
information as the dense block. This module holds what the parameter server needs to do that,
with no MPI and no framework: the tables, row-aligned server shards (a shard boundary never cuts
a row, so each server owns whole rows of a table and a large table spreads over servers), the
segments of one shard, and the rule that picks sparse or dense.

The rule (``auto``): a segment of R rows of width d goes sparse when its k touched rows, sent as
k int64 ids plus k x d float32 values, take at most ``AUTO_MAX_SHARE`` of the dense block's
bytes: ``k * (8 + 4 d) <= AUTO_MAX_SHARE * 4 R d``. The margin pays for gathering the rows on the
worker and scattering them on the server, which dense transfers do not do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ID_BYTES = 8
"""Row ids travel as int64."""
AUTO_MAX_SHARE = 0.5
"""``auto`` goes sparse when ids and rows take at most this share of the dense bytes."""


@dataclass(frozen=True)
class EmbeddingTable:
    """One embedding table in the flat buffer: ``rows x dim`` float32 from ``offset``."""

    name: str
    offset: int
    rows: int
    dim: int

    @property
    def end(self) -> int:
        """One past the table's last element in the flat buffer."""
        return self.offset + self.rows * self.dim


@dataclass(frozen=True)
class Segment:
    """A contiguous piece ``[lo, hi)`` of one server's shard: dense (``table`` -1) or rows
    ``row0 .. row0 + (hi - lo) / dim`` of embedding table ``table``."""

    lo: int
    hi: int
    table: int = -1
    row0: int = 0
    dim: int = 1

    @property
    def rows(self) -> int:
        """Rows of an embedding segment (elements of a dense one)."""
        return (self.hi - self.lo) // self.dim

    @property
    def sparse_capable(self) -> bool:
        return self.table >= 0


def check_tables(tables: list[EmbeddingTable], n: int) -> None:
    """Tables must lie inside the flat buffer of ``n`` elements, in order, without overlap."""
    end = 0
    for t in tables:
        if t.offset < end or t.end > n or t.rows < 1 or t.dim < 1:
            raise ValueError(f"embedding table {t.name} [{t.offset}, {t.end}) does not fit "
                             f"the flat buffer of {n} elements in order")
        end = t.end


def align_bounds(bounds: list[tuple[int, int]],
                 tables: list[EmbeddingTable]) -> list[tuple[int, int]]:
    """``bounds`` (contiguous shards) with every boundary inside a table moved to the nearest
    row boundary, so no server owns part of a row."""
    cuts = [hi for _, hi in bounds[:-1]]
    for i, c in enumerate(cuts):
        for t in tables:
            if t.offset < c < t.end:
                cuts[i] = t.offset + round((c - t.offset) / t.dim) * t.dim
    lo = bounds[0][0]
    out = []
    for c in [*cuts, bounds[-1][1]]:
        c = max(c, lo)  # rounding may not reorder shards
        out.append((lo, c))
        lo = c
    return out


def segments(lo: int, hi: int, tables: list[EmbeddingTable]) -> list[Segment]:
    """The shard ``[lo, hi)`` cut into dense pieces and embedding-row pieces, in order."""
    out: list[Segment] = []
    pos = lo
    for i, t in enumerate(tables):
        a, b = max(lo, t.offset), min(hi, t.end)
        if a >= b:
            continue
        if pos < a:
            out.append(Segment(pos, a))
        out.append(Segment(a, b, i, (a - t.offset) // t.dim, t.dim))
        pos = b
    if pos < hi:
        out.append(Segment(pos, hi))
    return out


def row_ranges(shards: list[tuple[int, int]], tables: list[EmbeddingTable]) -> list[dict]:
    """For the record: which rows of which table each server owns."""
    out = []
    for s, (lo, hi) in enumerate(shards):
        for seg in segments(lo, hi, tables):
            if seg.sparse_capable:
                out.append({"server": s, "table": tables[seg.table].name,
                            "rows": [seg.row0, seg.row0 + seg.rows]})
    return out


def sparse_bytes(k: int, dim: int) -> int:
    """Bytes of ``k`` rows sent sparse: ids and values."""
    return k * (ID_BYTES + 4 * dim)


def goes_sparse(mode: str, k: int, seg: Segment) -> bool:
    """Whether a segment with ``k`` touched rows travels sparse under ``mode`` (see the module
    docstring for ``auto``'s rule)."""
    if mode == "on":
        return True
    if mode == "off":
        return False
    return sparse_bytes(k, seg.dim) <= AUTO_MAX_SHARE * 4 * seg.rows * seg.dim


def local_ids(touched: np.ndarray, seg: Segment) -> np.ndarray:
    """The segment's rows among a table's touched rows (sorted, unique), counted from the
    segment's first row."""
    a, b = np.searchsorted(touched, [seg.row0, seg.row0 + seg.rows])
    return touched[a:b] - seg.row0


def gather_rows(block: np.ndarray, ids: np.ndarray, dim: int) -> np.ndarray:
    """Rows ``ids`` of a flat ``rows x dim`` block, as one contiguous ``len(ids) x dim`` array."""
    return np.ascontiguousarray(block.reshape(-1, dim)[ids])
