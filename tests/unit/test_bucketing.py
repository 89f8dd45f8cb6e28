"""Length bucketing, per-rank token budgets, epoch schedules, padding statistics and idle time."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from hvdscale.config import load_config
from hvdscale.core.batching import (
    BatchPlan,
    aligned_sequence,
    bucket_ids,
    build_schedule,
    geometric_boundaries,
    local_summary,
    make_plan,
    make_schedule,
    per_rank_token_budget,
)
from hvdscale.core.meter import StepMeter, idle_times, summarize
from hvdscale.corpora.corpus import load_corpus
from hvdscale.errors import ConfigError, HvdscaleError
from hvdscale.records.run import RunRecord
from hvdscale.study.report.points import collect
from hvdscale.study.report.tables import markdown
from tests.records_fixture import run_record

BASE = ["data.synthetic.sentences_per_rank=300", "data.synthetic.max_len=60",
        "data.synthetic.mean_len=12", "data.batch_size=16", "data.bucketing.enabled=true"]


def _cfg(*o: str):
    return load_config(None, [*BASE, *o])


def _plan(cfg, kind: str = "lm", rank: int = 0, size: int = 1) -> BatchPlan:
    corpus = load_corpus(cfg.data, kind, 100, 120, rank, size)
    return make_plan(corpus, cfg.data, kind, rank, size)


def _bucket(length: int, bounds: list[int]) -> int:
    return int(np.searchsorted(np.array(bounds), length, side="left"))


@pytest.mark.parametrize("extra,bounds", [
    ((), None), (("data.bucketing.boundaries=[10,20,40]",), [10, 20, 40])])
def test_every_batch_comes_from_one_bucket(extra: tuple, bounds: list[int] | None) -> None:
    plan = _plan(_cfg(*extra))
    lengths = plan._lengths()
    bounds = bounds or geometric_boundaries(int(lengths.max()))
    batches = plan.epoch_batches(0)
    for idx in batches:
        assert len({_bucket(int(lengths[i]), bounds) for i in idx}) == 1
    # Every sentence once per epoch: a bucket's last partial batch is kept.
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(lengths)))


def test_geometric_boundaries_grow_by_a_quarter_up_to_the_max() -> None:
    b = geometric_boundaries(60)
    assert b[0] == 8 and b[-1] == 60
    pairs = list(itertools.pairwise(b))
    assert all(hi > lo for lo, hi in pairs)
    assert all(hi <= max(lo * 1.25, lo + 1) + 1 for lo, hi in pairs[:-1])


def test_buckets_are_shuffled_per_epoch_with_the_seed() -> None:
    plan = _plan(_cfg())
    e0 = [tuple(i) for i in plan.epoch_batches(0)]
    assert e0 == [tuple(i) for i in _plan(_cfg()).epoch_batches(0)]  # seeded: reproducible
    assert e0 != [tuple(i) for i in plan.epoch_batches(1)]  # a new shuffle each epoch
    lengths = plan._lengths()
    bounds = geometric_boundaries(int(lengths.max()))
    buckets = [_bucket(int(lengths[i[0]]), bounds) for i in e0]
    assert buckets != sorted(buckets)  # buckets interleave, not short-to-long
    fixed = _plan(_cfg("data.shuffle=false")).epoch_batches(0)
    fbuckets = [_bucket(int(lengths[i[0]]), bounds) for i in fixed]
    assert fbuckets == sorted(fbuckets)  # no shuffle: bucket after bucket


def test_token_budget_counts_padding_and_splits_under_strong_scaling() -> None:
    weak = _cfg("data.bucketing.tokens_per_batch=301")
    strong = _cfg("data.bucketing.tokens_per_batch=301", "data.scaling=strong")
    assert [per_rank_token_budget(weak.data, r, 2) for r in range(2)] == [301, 301]
    assert [per_rank_token_budget(strong.data, r, 2) for r in range(2)] == [151, 150]
    assert per_rank_token_budget(_cfg().data, 1, 2) == 0
    with pytest.raises(HvdscaleError, match="no tokens"):
        per_rank_token_budget(_cfg("data.bucketing.tokens_per_batch=1",
                                   "data.scaling=strong").data, 1, 2)
    plan = _plan(strong, rank=1, size=2)
    assert plan.tokens_per_batch == 150
    lengths = plan._lengths()
    sizes = []
    for idx in plan.epoch_batches(0):
        assert len(idx) * int(lengths[idx].max()) <= 150 or len(idx) == 1
        sizes.append(len(idx))
    assert max(sizes) > 2 * min(sizes)  # short sentences fill a budget with more of them


@pytest.mark.parametrize("kind", ["lm", "nmt"])
@pytest.mark.parametrize("pad_to", ["batch", "max"])
def test_slot_counts_match_the_built_batches(kind: str, pad_to: str) -> None:
    plan = _plan(_cfg(f"data.pad_to={pad_to}"), kind)
    for idx in plan.epoch_batches(0)[:20]:
        b = plan.make(idx)
        assert plan.slots(idx, pad_to == "max") == (b.words, b.padded_tokens)


def test_padding_profile_bucketing_beats_plain_batches() -> None:
    prof = _plan(_cfg(), "nmt").padding_profile()
    frac = {k: 1 - v["words"] / v["slots"] for k, v in prof.items()}
    assert frac["configured"] < 0.5 * frac["unbucketed"]
    assert frac["unbucketed"] < frac["pad_to_max"]
    plain = _plan(_cfg("data.bucketing.enabled=false"), "nmt").padding_profile()
    assert plain["configured"] == plain["unbucketed"]


class FakeWorld:
    """The collectives ``make_schedule`` needs, answering for ranks that are not here."""

    def __init__(self, rank: int, counts: list[int | None]) -> None:
        self.rank, self.size, self.counts = rank, len(counts), counts

    def allgather(self, obj: Any) -> list[Any]:
        assert obj == self.counts[self.rank]
        return list(self.counts)


def test_epoch_steps_are_the_most_batches_and_servers_are_ignored() -> None:
    cfg = _cfg("measure.epochs=1", "measure.warmup_steps=0")
    schedule, stream = build_schedule(cfg.measure, None, [None, 5, 9], "per_rank")
    assert schedule.steps == 9 and schedule.batches_per_rank == (None, 5, 9)
    assert list(stream) == [None] * 9
    with pytest.raises(HvdscaleError, match="no rank has a batch"):
        build_schedule(cfg.measure, None, [0, None], "per_rank")


def test_epoch_schedule_pads_a_short_rank_with_no_batch() -> None:
    cfg = _cfg("measure.epochs=2", "measure.warmup_steps=3")
    plan = _plan(cfg)
    own = len(plan.epochs(2))
    world = FakeWorld(0, [own, own + 4])
    schedule, stream = make_schedule(cfg.measure, plan, world)  # type: ignore[arg-type]
    items = list(stream)
    assert schedule.steps == own + 4 and schedule.epochs == 2
    assert schedule.batches_per_rank == (own, own + 4)
    assert len(items) == 3 + own + 4
    assert all(b is not None for b in items[: 3 + own]) and items[3 + own:] == [None] * 4
    # The measured window is exactly two epochs: every sentence twice.
    words = sum(b.words for b in items[3 : 3 + own])
    assert words == 2 * sum(len(s) - 1 for s in plan.corpus.src)
    # Serve-only ranks get no batch at all.
    _, server = make_schedule(cfg.measure, None, FakeWorld(1, [own, None]))  # type: ignore
    assert list(server) == [None] * (3 + own)


def test_fixed_step_schedule_needs_no_collective() -> None:
    cfg = _cfg("measure.steps=5", "measure.warmup_steps=2")

    class NoCollectives:
        size = 2

        def allgather(self, obj: Any) -> list[Any]:
            raise AssertionError("fixed-step schedules must not communicate")

    schedule, stream = make_schedule(cfg.measure, _plan(cfg), NoCollectives())  # type: ignore
    assert schedule.steps == 5 and len([b for b in stream if b is not None]) == 7


def test_measure_epochs_and_align_ranks_are_validated() -> None:
    with pytest.raises(ConfigError, match=r"measure\.epochs must be >= 0"):
        _cfg("measure.epochs=-1")
    with pytest.raises(ConfigError, match=r"mode=aligned needs data\.bucketing\.enabled"):
        _cfg("data.bucketing.enabled=false", "data.bucketing.align_ranks=true")


def test_bucket_ids_agree_across_ranks_whatever_their_longest_sentence() -> None:
    cfg = _cfg().data.bucketing
    short = bucket_ids(np.array([3, 9, 40, 61]), cfg)  # this rank's longest is 61
    long = bucket_ids(np.array([3, 9, 40, 61, 100]), cfg)  # this one's is 100
    assert short.tolist() == long[:4].tolist()


def test_aligned_sequence_gives_each_bucket_its_largest_count() -> None:
    counts = [{0: 3, 2: 1}, {0: 2, 1: 4}]
    seq = aligned_sequence(counts, seed=5, epoch=0)
    assert sorted(seq) == [0, 0, 0, 1, 1, 1, 1, 2]
    assert seq == aligned_sequence(counts, seed=5, epoch=0)  # the same on every rank
    assert seq != aligned_sequence(counts, seed=5, epoch=1)
    assert aligned_sequence(counts, 5, 0, shuffle=False) == [0, 0, 0, 1, 1, 1, 1, 2]


def _two_rank_streams(*extra: str) -> tuple[list[BatchPlan], list, list]:
    cfg = _cfg("data.bucketing.mode=aligned", "measure.warmup_steps=0", *extra)
    plans = [_plan(cfg, rank=r, size=2) for r in range(2)]
    gathered = [local_summary(cfg.measure, p, "aligned") for p in plans]
    built = [build_schedule(cfg.measure, p, gathered, "aligned") for p in plans]
    return plans, [s for s, _ in built], [list(it) for _, it in built]


def test_aligned_epochs_put_every_rank_in_one_bucket_per_step() -> None:
    plans, schedules, streams = _two_rank_streams("measure.epochs=2")
    assert schedules[0] == schedules[1] and schedules[0].aligned
    steps = schedules[0].steps
    assert all(len(s) == steps for s in streams)
    bounds = geometric_boundaries(100)
    for b0, b1 in zip(*streams, strict=True):
        if b0 is not None and b1 is not None:
            assert _bucket(int(b0.src_len.max()) + 1, bounds) == \
                _bucket(int(b1.src_len.max()) + 1, bounds)
    for plan, stream, total in zip(plans, streams, schedules[0].batches_per_rank, strict=True):
        real = [b for b in stream if b is not None]
        assert len(real) == total  # every batch of both epochs, once
        assert sum(b.words for b in real) == 2 * sum(len(s) - 1 for s in plan.corpus.src)
    assert any(b is None for s in streams for b in s)  # some rank idles in some bucket


def test_aligned_fixed_steps_draw_the_same_bucket_on_every_rank() -> None:
    _, schedules, streams = _two_rank_streams("measure.steps=40")
    assert schedules[0].steps == 40 and all(len(s) == 40 for s in streams)
    bounds = geometric_boundaries(100)
    same = [_bucket(int(b0.src_len.max()) + 1, bounds) == _bucket(int(b1.src_len.max()) + 1,
                                                                   bounds)
            for b0, b1 in zip(*streams, strict=True)]
    assert sum(same) >= 0.9 * len(same)  # the rest: a bucket one rank lacks, its nearest


def _rank(rank: int, compute: list[float], steps: list[float], idle_steps: int = 0) -> dict:
    m = StepMeter(warmup_steps=0)
    for c in compute:
        m.start_step()
        if c:
            m.end_step(0, 10, 5, 12, 2, 1.0, compute_s=c)
        else:
            m.end_step(0, 0, 0, 0, 0, 0.0, idle=True)
    m.step_times = steps
    m.window_start, m.window_end = 0.0, sum(steps)
    return dict(m.rank_summary(), rank=rank)


def test_idle_is_the_wait_for_the_slowest_compute_of_each_step() -> None:
    r0 = _rank(0, [0.10, 0.30, 0.20], [0.3, 0.3, 0.3])
    r1 = _rank(1, [0.20, 0.10, 0.00], [0.3, 0.3, 0.3])  # no batch at the last step
    idle = idle_times([r0, r1])
    p0, p1 = idle["per_rank"]
    assert p0["idle_s"] == pytest.approx(0.10)
    assert p1["idle_s"] == pytest.approx(0.20 + 0.20)
    assert (p0["idle_steps"], p1["idle_steps"]) == (0, 1)
    assert (p0["batches"], p1["batches"]) == (3, 2)
    assert idle["ranks_out_of_batches"] == [1]
    assert idle["idle_ms_per_step"] == pytest.approx(1e3 * 0.25 / 3)
    assert idle["idle_fraction"] == pytest.approx(0.5 / (2 * 0.9))
    # Replicas that never meet wait only at the end of the window.
    solo = idle_times([_rank(0, [0.1, 0.1], [0.1, 0.1]), _rank(1, [0.2, 0.2], [0.2, 0.2])],
                      synchronous=False)
    assert [p["idle_s"] for p in solo["per_rank"]] == pytest.approx([0.2, 0.0])
    s = summarize([r0, r1], [0, 1])
    assert s["idle"]["per_rank"][1]["idle_steps"] == 1 and s["padded_tokens"] == 12 * 5


def _padding(words: int, slots: int = 1000) -> dict[str, Any]:
    """One way of batching's real tokens against padded slots."""
    return {"words": words, "slots": slots, "padded_fraction": 1 - words / slots,
            "padding_ratio": slots / words, "work_ratio": slots / words}


def _record(strategy: str, ranks: int, scaling: str, idle_ms: float) -> RunRecord:
    return run_record(
        "model.kind=lm", f"strategy.name={strategy}", f"data.scaling={scaling}",
        "data.batch_size=33", "data.bucketing.enabled=true", "measure.epochs=1",
        ranks=ranks, workers=ranks, words_per_s=100.0 * ranks, window_s=1.0,
        step_time={"jitter": 0.001}, measure={"steps": 7, "epochs": 1}, padded_fraction=0.1,
        padding={"window": _padding(900), "epoch_configured": _padding(900),
                 "epoch_unbucketed": _padding(600), "epoch_pad_to_max": _padding(300)},
        idle={"steps": 7, "idle_ms_per_step": idle_ms, "idle_fraction": 0.05,
              "per_rank": [{"rank": r, "idle_ms_per_step": idle_ms * r, "idle_steps": r,
                            "idle_s": 7e-3 * idle_ms * r, "compute_s": 1.0}
                           for r in range(ranks)]})


def test_report_labels_scaling_and_shows_padding_and_idle() -> None:
    recs = [_record("horovod", 1, "strong", 0.0), _record("horovod", 2, "strong", 4.0),
            _record("horovod", 2, "weak", 2.0)]
    md = markdown(collect(recs))
    assert "strong scaling (fixed global batch divided across ranks)" in md
    assert "weak scaling (fixed batch per rank, global batch grows)" in md
    assert "|2|2|16-17|33|" in md  # strong: the global batch split over the ranks
    assert "|2|2|33|33 x 2 = 66|" in md  # weak: per rank fixed, global grows
    assert "Total time to run 1 epoch (s)" in md
    assert "### Padding and straggler idle" in md
    assert ("|torch / fused / horovod|2|900|1000|10.0|40.0|70.0|1.11|4.00|5.0|r0: 0.0 / r1: 4.0|"
            "r1: 1 of 7|") in md
