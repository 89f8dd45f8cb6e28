"""Corpora, vocabularies, batching, bucketing: counts are real, shards are disjoint."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hvdscale.config import load_config
from hvdscale.core.batching import BatchPlan, per_rank_batch_size
from hvdscale.corpora.corpus import (
    BOS,
    EOS,
    PAD,
    collate,
    concat_batches,
    load_corpus,
    load_text,
)
from hvdscale.errors import HvdscaleError


def _cfg(*o: str):
    return load_config(None, list(o))


def test_synthetic_is_seeded_and_per_rank() -> None:
    cfg = _cfg("data.synthetic.sentences_per_rank=50")
    a = load_corpus(cfg.data, "nmt", 100, 100, 0, 2)
    b = load_corpus(cfg.data, "nmt", 100, 100, 0, 2)
    c = load_corpus(cfg.data, "nmt", 100, 100, 1, 2)
    assert all(np.array_equal(x, y) for x, y in zip(a.src, b.src, strict=True))
    assert not all(len(x) == len(y) and np.array_equal(x, y)
                   for x, y in zip(a.src, c.src, strict=True))
    lens = [len(s) for s in a.src]
    assert min(lens) >= 3 and max(lens) <= 100
    assert all(s.min() >= 4 and s.max() < 100 for s in a.src)


def test_collate_counts_real_and_padded_tokens() -> None:
    src = [np.array([5, 6, 7]), np.array([8])]
    tgt = [np.array([9, 10]), np.array([11, 12, 13, 14])]
    b = collate(src, tgt, "nmt")
    assert b.src.tolist() == [[5, 6, 7], [8, PAD, PAD]]
    assert b.tgt_in.tolist() == [[BOS, 9, 10, PAD, PAD], [BOS, 11, 12, 13, 14]]
    assert b.tgt_out.tolist() == [[9, 10, EOS, PAD, PAD], [11, 12, 13, 14, EOS]]
    assert b.loss_tokens == 3 + 5
    assert b.words == 4 + 8
    assert b.padded_tokens == 6 + 10
    lm = collate([np.array([5, 6, 7, 8]), np.array([9, 10])], None, "lm")
    assert lm.src.tolist() == [[5, 6, 7], [9, PAD, PAD]]
    assert lm.tgt_out.tolist() == [[6, 7, 8], [10, PAD, PAD]]
    assert lm.words == lm.loss_tokens == 4
    u = concat_batches([b, collate([np.array([1, 2, 3, 4, 5])], [np.array([6])], "nmt")])
    assert u.src.shape == (3, 5) and u.loss_tokens == b.loss_tokens + 2


def test_strong_scaling_splits_global_batch_unevenly() -> None:
    cfg = _cfg("data.batch_size=7", "data.scaling=strong")
    assert [per_rank_batch_size(cfg.data, r, 2) for r in range(2)] == [4, 3]
    assert per_rank_batch_size(_cfg("data.batch_size=7").data, 1, 2) == 7
    with pytest.raises(HvdscaleError, match="empty batch"):
        per_rank_batch_size(_cfg("data.batch_size=1", "data.scaling=strong").data, 1, 2)


def test_bucketing_cuts_padding() -> None:
    base = ["data.synthetic.sentences_per_rank=400", "data.synthetic.max_len=80"]
    plain = _cfg(*base, "data.batch_size=16")
    bucketed = _cfg(*base, "data.batch_size=16", "data.bucketing.enabled=true")
    corpus = load_corpus(plain.data, "lm", 100, 100, 0, 1)

    def pad_frac(cfg) -> float:
        plan = BatchPlan(corpus, cfg.data, "lm", 16, 0)
        batches = [plan.make(i) for i in plan.epoch_batches(0)]
        assert sum(b.sentences for b in batches) >= 0.9 * len(corpus.src)
        return 1 - sum(b.words for b in batches) / sum(b.padded_tokens for b in batches)

    assert pad_frac(bucketed) < 0.5 * pad_frac(plain)
    budget = _cfg(*base, "data.bucketing.enabled=true", "data.bucketing.tokens_per_batch=300")
    plan = BatchPlan(corpus, budget.data, "lm", 16, 0)
    for idx in plan.epoch_batches(0):
        b = plan.make(idx)
        assert b.padded_tokens <= 300 or b.sentences == 1


def _write(p: Path, lines: list[str]) -> str:
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def test_text_corpus_vocab_and_shards(tmp_path: Path) -> None:
    src = _write(tmp_path / "s.txt", ["a b c", "a b", "c d e f", "", "a"])
    tgt = _write(tmp_path / "t.txt", ["x y", "x", "y z", "", "w"])
    cfg = _cfg("data.source=text", f"data.text.src={src}", f"data.text.tgt={tgt}")
    r0 = load_text(cfg.data.text, "nmt", 0, 2)
    r1 = load_text(cfg.data.text, "nmt", 1, 2)
    assert len(r0.src) == 3 and len(r1.src) == 1  # the empty line is dropped
    assert r0.src_vocab == r1.src_vocab == 4 + 6
    vocab_file = _write(tmp_path / "v.txt", ["a", "b"])
    cfg2 = _cfg("data.source=text", f"data.text.src={src}", f"data.text.tgt={tgt}",
                f"data.text.src_vocab_file={vocab_file}")
    r = load_text(cfg2.data.text, "nmt", 0, 1)
    assert r.src_vocab == 6 and 1 in np.concatenate(r.src)  # c, d, e, f become <unk>


@pytest.mark.parametrize("case,needle", [
    ("missing", "corpus file not found"),
    ("empty", "corpus file is empty"),
    ("mismatch", "parallel corpus line counts differ"),
    ("tinyvocab", "vocabulary too small"),
])
def test_text_corpus_errors(tmp_path: Path, case: str, needle: str) -> None:
    src = _write(tmp_path / "s.txt", ["a b", "c d"])
    tgt = _write(tmp_path / "t.txt", ["x", "y"])
    extra: list[str] = []
    if case == "missing":
        src = str(tmp_path / "nope.txt")
    elif case == "empty":
        (tmp_path / "t.txt").write_text("\n\n")
    elif case == "mismatch":
        _write(tmp_path / "t.txt", ["x", "y", "z"])
    elif case == "tinyvocab":
        extra = [f"data.text.src_vocab_file={_write(tmp_path / 'v.txt', ['<unk>'])}"]
    cfg = _cfg("data.source=text", f"data.text.src={src}", f"data.text.tgt={tgt}", *extra)
    with pytest.raises(HvdscaleError, match=needle):
        load_text(cfg.data.text, "nmt", 0, 1)


def test_batch_larger_than_data() -> None:
    cfg = _cfg("data.synthetic.sentences_per_rank=10", "data.batch_size=32")
    corpus = load_corpus(cfg.data, "nmt", 50, 50, 0, 1)
    with pytest.raises(HvdscaleError, match="larger than the 10 sentences"):
        BatchPlan(corpus, cfg.data, "nmt", 32, 0)
