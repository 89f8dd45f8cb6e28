"""``data.bucketing.mode=global``: one global batch per step from one bucket, split across the
ranks by padded slots; every sentence once per epoch; the schedule; config and work ratio."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from hvdscale.config import load_config
from hvdscale.core.batching import (
    GlobalPlan,
    bucket_ids,
    build_schedule,
    local_summary,
    make_plan,
    split_by_slots,
)
from hvdscale.corpora.corpus import Corpus, load_corpus
from hvdscale.errors import ConfigError, HvdscaleError
from hvdscale.train.record import padding_summary

PRIME = 1009  # sentences: no global batch size or rank count divides it


def _cfg(*o: str):
    return load_config(None, ["data.bucketing.enabled=true", "data.bucketing.mode=global",
                              "measure.warmup_steps=0", *o])


def _long_tailed_corpus(n: int = PRIME, seed: int = 3) -> Corpus:
    """Lognormal lengths (mean ~12) plus a tail of a few very long sentences."""
    rng = np.random.default_rng(seed)
    lens = np.clip(np.rint(rng.lognormal(np.log(10), 0.7, size=n)), 2, 200).astype(int)
    lens[rng.choice(n, 7, replace=False)] = rng.integers(120, 200, size=7)
    return Corpus([rng.integers(4, 50, size=k) for k in lens], None, 50, 50)


def _plans(cfg, corpus: Corpus, n: int) -> list[GlobalPlan]:
    plans = [make_plan(corpus, cfg.data, "lm", w, n) for w in range(n)]
    assert all(isinstance(p, GlobalPlan) for p in plans)
    return plans  # type: ignore[return-value]


@pytest.mark.parametrize("extra", [("data.bucketing.tokens_per_batch=300",),
                                   ("data.batch_size=17",),
                                   ("data.bucketing.tokens_per_batch=300", "data.shuffle=false")],
                         ids=["token-budget", "sentences", "no-shuffle"])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_every_sentence_exactly_once_per_epoch_across_the_ranks(extra: tuple, n: int) -> None:
    cfg = _cfg("data.scaling=strong", *extra)
    corpus = _long_tailed_corpus()
    plans = _plans(cfg, corpus, n)
    lengths = plans[0]._lengths()
    buckets = bucket_ids(lengths, cfg.data.bucketing)
    for epoch in range(2):
        glob = plans[0].global_batches(epoch)
        for p in plans[1:]:  # every rank derives the same global batches
            assert [g.tolist() for g in p.global_batches(epoch)] == [g.tolist() for g in glob]
        steps = [p.epoch_steps(epoch) for p in plans]
        assert all(len(s) == len(glob) for s in steps)
        for j, gidx in enumerate(glob):
            assert len(set(buckets[gidx].tolist())) == 1  # one bucket per global batch
            parts = [s[j] for s in steps if s[j] is not None]
            union = np.concatenate(parts)
            assert sorted(union.tolist()) == sorted(gidx.tolist())  # the split loses nothing
        seen = np.concatenate([idx for p in plans for idx in p.epoch_batches(epoch)])
        assert len(seen) == PRIME and sorted(seen.tolist()) == list(range(PRIME))
    if n > 1:  # the test exercised uneven parts and empty ones
        counts = [{len(s[j]) if s[j] is not None else 0 for s in steps} for j in range(len(glob))]
        assert any(len(c) > 1 for c in counts)


def _max_slots(parts: list[np.ndarray], lengths: np.ndarray) -> int:
    return max((len(p) * int(lengths[p].max()) for p in parts if len(p)), default=0)


def test_split_is_the_best_contiguous_split_by_padded_slots() -> None:
    rng = np.random.default_rng(0)
    for _ in range(300):
        n, parts = int(rng.integers(1, 9)), int(rng.integers(1, 4))
        lengths = rng.integers(1, 30, size=n)
        split = split_by_slots(lengths, np.arange(n), parts)
        assert len(split) == parts
        assert sorted(np.concatenate(split).tolist()) == list(range(n))
        if n >= parts:
            assert all(len(p) for p in split)  # nobody idles while sentences remain
        else:
            assert sum(len(p) == 0 for p in split) == parts - n
        order = np.argsort(-lengths, kind="stable")
        best = min(_max_slots([order[a:b] for a, b in itertools.pairwise((0, *cuts, n))],
                              lengths)
                   for cuts in itertools.combinations_with_replacement(range(n + 1), parts - 1)
                   if list(cuts) == sorted(cuts))
        assert _max_slots(split, lengths) == best


def test_split_balances_a_bucket_and_orders_longest_first() -> None:
    lengths = np.array([20] * 10 + [16] * 30)
    a, b = split_by_slots(lengths, np.arange(40), 2)
    assert lengths[a].min() >= lengths[b].max()  # contiguous length ranges
    slots = [len(p) * int(lengths[p].max()) for p in (a, b)]
    assert max(slots) - min(slots) <= 20  # within one sentence's worth
    assert len(a) < len(b)  # longer sentences: fewer of them


def test_parts_rotate_over_the_ranks() -> None:
    cfg = _cfg("data.scaling=strong", "data.batch_size=7")
    plan = _plans(cfg, _long_tailed_corpus(), 3)[0]
    g = plan.global_batches(0)[0]
    longest = split_by_slots(plan._lengths(), g, 3)[0]
    holder = [next(w for w, p in enumerate(plan.parts(g, j)) if np.array_equal(p, longest))
              for j in range(3)]
    assert sorted(holder) == [0, 1, 2]


def test_global_budget_is_per_rank_times_ranks_when_weak() -> None:
    corpus = _long_tailed_corpus()
    weak = _plans(_cfg("data.bucketing.tokens_per_batch=300"), corpus, 3)[0]
    strong = _plans(_cfg("data.bucketing.tokens_per_batch=300", "data.scaling=strong"),
                    corpus, 3)[0]
    assert (weak.tokens_per_batch, strong.tokens_per_batch) == (900, 300)
    lengths = weak._lengths()
    for plan, budget in ((weak, 900), (strong, 300)):
        for g in plan.global_batches(0):
            assert len(g) * int(lengths[g].max()) <= budget or len(g) == 1
    sents = _plans(_cfg("data.batch_size=5"), corpus, 3)[0]
    assert sents.batch_size == 15 and max(len(g) for g in sents.global_batches(0)) == 15


@pytest.mark.parametrize("kind", ["lm", "nmt"])
def test_global_synthetic_corpus_is_the_union_of_the_rank_shards(kind: str) -> None:
    cfg = _cfg("data.synthetic.sentences_per_rank=50")
    per_rank = load_config(None, ["data.synthetic.sentences_per_rank=50"]).data
    whole = load_corpus(cfg.data, kind, 100, 120, 1, 3)
    shards = [load_corpus(per_rank, kind, 100, 120, w, 3) for w in range(3)]
    assert len(whole.src) == 150
    for a, b in zip(whole.src, [s for c in shards for s in c.src], strict=True):
        assert np.array_equal(a, b)
    if kind == "nmt":
        assert whole.tgt is not None and len(whole.tgt) == 150


def test_global_text_corpus_is_read_whole_on_every_rank(tmp_path: Path) -> None:
    f = tmp_path / "c.txt"
    f.write_text("".join(f"w{i} " * (2 + i % 5) + "\n" for i in range(13)))
    cfg = _cfg("data.source=text", f"data.text.src={f}", "model.kind=lm")
    assert len(load_corpus(cfg.data, "lm", 0, 0, 1, 2).src) == 13
    assert len(load_corpus(_cfg("data.source=text", f"data.text.src={f}", "model.kind=lm",
                                "data.bucketing.mode=per_rank").data, "lm", 0, 0, 1, 2).src) == 6


def _streams(cfg, n: int):
    plans = _plans(cfg, _long_tailed_corpus(), n)
    gathered = [local_summary(cfg.measure, p, "global") for p in plans]
    built = [build_schedule(cfg.measure, p, gathered, "global") for p in plans]
    return plans, [s for s, _ in built], [list(st) for _, st in built]


def test_global_epoch_schedule_gives_every_rank_its_part_or_none() -> None:
    cfg = _cfg("data.scaling=strong", "data.bucketing.tokens_per_batch=300", "measure.epochs=2",
               "measure.warmup_steps=2")
    plans, schedules, streams = _streams(cfg, 3)
    glob = [g for e in range(2) for g in plans[0].global_batches(e)]
    s = schedules[0]
    assert all(x == s for x in schedules) and s.mode == "global" and s.steps == len(glob)
    assert all(len(st) == 2 + s.steps for st in streams)
    for w, st in enumerate(streams):
        assert sum(b is not None for b in st[2:]) == s.batches_per_rank[w]
    assert any(b is None for st in streams for b in st[2:])  # idle ranks at bucket tails
    # The measured window is exactly two epochs: every sentence twice, in the global batches.
    for j, g in enumerate(glob):
        assert sum(st[2 + j].sentences for st in streams if st[2 + j] is not None) == len(g)
    words = sum(b.words for st in streams for b in st[2:] if b is not None)
    assert words == 2 * sum(len(x) - 1 for x in plans[0].corpus.src)
    # A serve-only rank gets nothing; fixed steps give warm-up + steps items per rank.
    _, server = build_schedule(cfg.measure, None, [None, *(local_summary(cfg.measure, p,
                                                                         "global")
                                                           for p in plans)], "global")
    assert list(server) == [None] * (2 + s.steps)
    fixed = _cfg("data.bucketing.tokens_per_batch=300", "measure.steps=40")
    _, schedules, streams = _streams(fixed, 2)
    assert schedules[0].steps == 40 and all(len(st) == 40 for st in streams)


def test_ranks_that_derive_different_global_batches_are_stopped() -> None:
    cfg = _cfg("measure.epochs=1", "data.bucketing.tokens_per_batch=300")
    a = make_plan(_long_tailed_corpus(seed=3), cfg.data, "lm", 0, 2)
    b = make_plan(_long_tailed_corpus(seed=4), cfg.data, "lm", 1, 2)
    gathered = [local_summary(cfg.measure, p, "global") for p in (a, b)]
    with pytest.raises(HvdscaleError, match="different global batches"):
        build_schedule(cfg.measure, a, gathered, "global")


def test_bucketing_mode_config() -> None:
    assert load_config(None, []).data.bucketing.mode == "per_rank"
    alias = load_config(None, ["data.bucketing.enabled=true", "data.bucketing.align_ranks=true"])
    assert alias.data.bucketing.mode == "aligned"
    aligned = load_config(None, ["data.bucketing.enabled=true", "data.bucketing.mode=aligned"])
    assert aligned.data.bucketing.align_ranks  # older readers still see it
    with pytest.raises(ConfigError, match=r"align_ranks=true .* conflicts with "
                                          r"data\.bucketing\.mode=global"):
        _cfg("data.bucketing.align_ranks=true")
    with pytest.raises(ConfigError, match=r"data\.bucketing\.mode must be one of"):
        _cfg("data.bucketing.mode=everywhere")
    with pytest.raises(ConfigError, match=r"mode=global needs data\.bucketing\.enabled=true"):
        _cfg("data.bucketing.enabled=false")


def test_work_ratio_of_the_packed_kernel_counts_live_sequences_only() -> None:
    profile = {k: {"words": 900, "slots": 1200} for k in ("configured", "unbucketed",
                                                         "pad_to_max")}
    fused = padding_summary([profile], 900, 1200, "fused")
    loop = padding_summary([profile], 900, 1200, "loop")
    assert fused["window"]["padding_ratio"] == loop["window"]["padding_ratio"] == 1200 / 900
    assert fused["window"]["work_ratio"] == 1.0
    assert loop["window"]["work_ratio"] == 1200 / 900
