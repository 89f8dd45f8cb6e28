"""The sparse-merging layout (row-aligned shards, segments, the auto rule), the adapters'
embedding tables, and the config's auto|on|off (YAML's bare on/off included)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hvdscale.config import load_config
from hvdscale.frameworks.embeddings import EmbeddingRows
from hvdscale.models import EMBEDDING_INPUTS
from hvdscale.strategies.param_server import partition
from hvdscale.strategies.sparse_rows import (
    EmbeddingTable,
    Segment,
    align_bounds,
    goes_sparse,
    local_ids,
    row_ranges,
    segments,
)

TABLES = [EmbeddingTable("a", 0, 100, 8), EmbeddingTable("b", 800, 50, 8)]
N = 800 + 400 + 333  # two tables, then 333 dense elements


def test_aligned_shards_never_cut_a_row_and_spread_a_large_table() -> None:
    for servers in (1, 2, 3, 5):
        shards = align_bounds(partition(N, servers), TABLES)
        assert shards[0][0] == 0 and shards[-1][1] == N
        assert all(a[1] == b[0] for a, b in itertools.pairwise(shards))
        for lo, hi in shards:
            for t in TABLES:
                for cut in (lo, hi):
                    if t.offset < cut < t.end:
                        assert (cut - t.offset) % t.dim == 0
            segs = segments(lo, hi, TABLES)
            assert sum(s.hi - s.lo for s in segs) == hi - lo
    owners = {r["server"] for r in row_ranges(align_bounds(partition(N, 3), TABLES), TABLES)
              if r["table"] == "a"}
    assert len(owners) >= 2, "a table larger than a shard spreads over servers"


def test_local_ids_and_the_auto_rule() -> None:
    seg = Segment(80, 800, 0, 10, 8)  # rows 10..99 of table a
    assert list(local_ids(np.array([3, 10, 11, 99]), seg)) == [0, 1, 89]
    # auto: sparse while k (8 + 4 d) <= 0.5 x 4 R d, R = 90, d = 8: k <= 36
    assert goes_sparse("auto", 36, seg) and not goes_sparse("auto", 37, seg)
    assert goes_sparse("on", 90, seg) and not goes_sparse("off", 0, seg)


def test_embedding_tables_follow_the_flat_layout() -> None:
    sizes = [("src_embed.weight", 50 * 4), ("tgt_embed.weight", 60 * 4), ("proj.weight", 10)]
    rows = EmbeddingRows(EMBEDDING_INPUTS["nmt"], sizes, {"src": 50, "tgt_in": 60})
    assert [(t.name, t.offset, t.rows) for t in rows.tables] == \
        [("src_embed.weight", 0, 50), ("tgt_embed.weight", 200, 60)]


def test_sparse_embeddings_setting_reads_yaml_on_off(tmp_path) -> None:
    f = tmp_path / "c.yaml"
    for text, want in (("on", "on"), ("off", "off"), ("auto", "auto")):
        f.write_text(f"strategy:\n  name: ps\n  ps:\n    sparse_embeddings: {text}\n")
        assert load_config(str(f), []).strategy.ps.sparse_embeddings == want


def test_a_segment_is_dense_unless_given_a_table_and_layouts_are_immutable() -> None:
    """Issue 39 (mutation survivors): a segment made without a table is dense (table -1, never
    sparse-capable), and a table or segment, shared by every server's plan, cannot change."""
    import dataclasses

    dense = Segment(0, 4)
    assert dense.table == -1 and not dense.sparse_capable and Segment(0, 8, 0).sparse_capable
    for thing, field in ((dense, "lo"), (TABLES[0], "rows")):
        try:
            setattr(thing, field, 3)
        except dataclasses.FrozenInstanceError:
            continue
        raise AssertionError(f"{type(thing).__name__}.{field} could be changed")


def test_a_segments_defaults_and_rows() -> None:
    seg = Segment(8, 32)  # dense: its rows are its elements
    assert (seg.row0, seg.dim, seg.rows) == (0, 1, 24)
    rows = Segment(16, 40, 0, 2, 8)
    assert rows.rows == 3 and isinstance(rows.rows, int)
    assert Segment(0, 4).sparse_capable is False  # a property, read without a call


def test_tables_must_fit_the_buffer_in_order_to_the_element() -> None:
    from hvdscale.strategies.sparse_rows import check_tables

    check_tables([EmbeddingTable("a", 0, 10, 4), EmbeddingTable("b", 40, 5, 2)], 50)  # flush
    check_tables([EmbeddingTable("a", 0, 1, 1)], 1)
    for tables, n in (([EmbeddingTable("a", 0, 10, 4), EmbeddingTable("b", 39, 5, 2)], 60),
                      ([EmbeddingTable("a", 0, 10, 4)], 39),
                      ([EmbeddingTable("a", 0, 0, 4)], 40),
                      ([EmbeddingTable("a", 0, 10, 0)], 40)):
        with pytest.raises(ValueError) as e:
            check_tables(tables, n)
        t = tables[-1]
        assert str(e.value) == (f"embedding table {t.name} [{t.offset}, {t.end}) does not fit the "
                                f"flat buffer of {n} elements in order")


def test_every_inner_boundary_moves_to_the_nearest_row() -> None:
    table = [EmbeddingTable("t", 0, 10, 4)]  # 40 elements, rows of 4
    bounds = [(0, 11), (11, 22), (22, 33), (33, 40)]
    assert align_bounds(bounds, table) == [(0, 12), (12, 24), (24, 32), (32, 40)]


def test_a_shard_is_cut_into_dense_and_row_pieces_exactly() -> None:
    tables = [EmbeddingTable("z", 0, 2, 2), EmbeddingTable("a", 4, 5, 2),
              EmbeddingTable("b", 14, 3, 2), EmbeddingTable("c", 30, 2, 5),
              EmbeddingTable("d", 32, 2, 2)]  # z before the shard, d just after it
    assert segments(6, 32, tables) == [Segment(6, 14, 1, 1, 2), Segment(14, 20, 2, 0, 2),
                                       Segment(20, 30), Segment(30, 32, 3, 0, 5)]
    assert all(type(s.row0) is int for s in segments(6, 32, tables))  # a row, never 1.0
    # A table that does not start at 0: the cut moves to its nearest row from its offset.
    assert align_bounds([(0, 19), (19, 48)], [EmbeddingTable("t", 8, 10, 4)]) == [
        (0, 20), (20, 48)]


def test_row_ranges_and_gathered_rows() -> None:
    from hvdscale.strategies.sparse_rows import gather_rows

    tables = [EmbeddingTable("a", 4, 5, 2)]  # rows 0..5 at elements 4..14
    assert row_ranges([(0, 8), (8, 20)], tables) == [
        {"server": 0, "table": "a", "rows": [0, 2]}, {"server": 1, "table": "a", "rows": [2, 5]}]
    got = gather_rows(np.arange(12.0), np.array([2, 0]), 3)
    assert got.tolist() == [[6.0, 7.0, 8.0], [0.0, 1.0, 2.0]] and got.flags.c_contiguous
