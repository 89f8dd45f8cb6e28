"""The byte model of sparse embedding gradients (issue 25) against bytes counted by hand on
crafted batches: what Horovod's gathered mode allgathers per framework, the parameter server's
push and (dense or union) pull, and that each strategy column and each record gets only its own
config's sparse traffic."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

import hvdscale.core.batching as batching
import hvdscale.corpora.corpus as data
from hvdscale.config import RunConfig, load_config
from hvdscale.records.run import RunRecord
from hvdscale.study.commbench.model import ps_phase
from hvdscale.study.predict import sparse_bytes as sb
from hvdscale.study.predict.compute import ComputeModel
from hvdscale.study.predict.cost import CommSetup, comm_time
from hvdscale.study.predict.forecast import predict, sparse_setup, validate
from hvdscale.study.predict.inputs import Network
from tests.records_fixture import run_record

D, SRC, TGT = 4, 50, 40
ROW = 8 + 4 * D
"""A PyTorch row on the wire: int64 id + D float32 values (TensorFlow: int32 id)."""
BATCHES = {0: {"src": [[5, 5, 7, 0], [3, 0, 0, 0]], "tgt_in": [[1, 4, 4, 0, 0], [1, 6, 0, 0, 0]]},
           1: {"src": [[7, 9, 0, 0], [9, 9, 9, 2]], "tgt_in": [[1, 8, 0, 0, 0], [1, 4, 4, 4, 4]]}}
"""Counted by hand (0 is padding). Rank 0: src 8 positions, 4 non-padding, distinct {0,3,5,7}
(3 without 0); tgt_in 10 positions, 5 non-padding, distinct {0,1,4,6} (3 without 0). Rank 1:
src distinct {0,2,7,9}, tgt_in {0,1,4,8}. Both ranks: src {0,2,3,5,7,9} = 6, tgt_in
{0,1,4,6,8} = 5."""
NET = Network(ring_alpha=1e-5, ring_beta=1e-9, ring_overhead=0.0, ps_alpha=2e-5, ps_beta=3e-9,
              mem_bw=1e9, source="test")


class CraftedPlan:
    """Every step the same crafted batch of its rank (as make_plan is called)."""

    def __init__(self, corpus: int, *_: object) -> None:
        self.batch = SimpleNamespace(**{k: np.array(v) for k, v in BATCHES[corpus].items()})

    def batches(self) -> Iterator[SimpleNamespace]:
        while True:
            yield self.batch


@pytest.fixture(autouse=True)
def crafted(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    monkeypatch.setattr(sb, "_TOUCHED", {})
    if "real_data" in request.fixturenames:  # the runner's own corpus and plans
        return
    monkeypatch.setattr(data, "load_corpus", lambda _d, _k, _s, _t, rank, _n: rank)
    monkeypatch.setattr(batching, "make_plan", lambda corpus, *_: CraftedPlan(corpus))


@pytest.fixture
def real_data() -> None:
    """Asks ``crafted`` to leave the runner's corpus and plans in place."""


def cfg(*sets: str) -> RunConfig:
    return load_config(None, ["model.kind=nmt", f"model.src_vocab={SRC}",
                              f"model.tgt_vocab={TGT}", f"model.embed_dim={D}",
                              "model.hidden_size=4", *sets])


def gathered(*sets: str) -> RunConfig:
    return cfg("strategy.name=horovod", "strategy.horovod.embedding_grads=gathered", *sets)


def sent(c: RunConfig) -> tuple[float, float]:
    t = sb.embedding_bytes(c)["tables"]
    return t["src_embed.weight"]["sent_bytes"], t["tgt_embed.weight"]["sent_bytes"]


def test_gathered_rows_per_framework_and_overlap() -> None:
    # TF: every position (padding too) with an int32 id; torch hooks: non-padding tokens;
    # torch after-backward: coalesced, distinct non-padding rows.
    assert sent(gathered("framework=tf")) == (8 * (4 + 4 * D), 10 * (4 + 4 * D))
    assert sent(gathered("strategy.horovod.overlap=hooks")) == (4 * ROW, 5 * ROW)
    assert sent(gathered("strategy.horovod.overlap=after-backward")) == (3 * ROW, 3 * ROW)


def dense_tensors(c: RunConfig) -> tuple[list[int], int]:
    """Dense bytes per tensor and the bytes of everything but the two tables."""
    tensors = [4 * n for _, n in sb.tensor_sizes(c)]
    return tensors, sum(tensors) - 4 * D * (SRC + TGT)


def test_gathered_is_an_allgather_beside_the_ring() -> None:
    c = gathered()
    tensors, rest = dense_tensors(c)
    n, a, b = 2, NET.ring_alpha, NET.ring_beta
    ring = 2 * (n - 1) * a + 2 * (n - 1) / n * rest * b
    # hooks: non-padding tokens, the mean of both ranks (src 4 and 6, tgt_in 5 and 7)
    gathers = sum((n - 1) * a + (n - 1) * p * b for p in (5 * ROW, 6 * ROW))
    setup = sparse_setup(c, "ring", n, CommSetup(1e12))
    assert comm_time("ring", n, tensors, NET, 0.0, 0.0, setup) == pytest.approx(ring + gathers)


@pytest.mark.parametrize("optim,pull_rows", [("sgd", (6, 5)), ("momentum", None)])
def test_ps_pull_is_union_for_sgd_else_dense(optim: str, pull_rows: tuple | None) -> None:
    c = cfg("strategy.name=ps", "strategy.ps.sparse_embeddings=on", f"optim.name={optim}")
    tensors, rest = dense_tensors(c)
    push = rest + (4 + 4) / 2 * ROW + (4 + 4) / 2 * ROW  # each rank's distinct ids, mean
    pull = rest + sum(pull_rows) * ROW if pull_rows else sum(tensors)
    assert sb.ps_bytes(c, 2) == pytest.approx((push, pull))
    msgs, frac = ps_phase(2, 1, "dedicated")
    assert (msgs, frac) == (2, 2.0)  # the one server hears both workers
    # the server's update stays dense over its shard: (W + 2) x the dense model
    want = 2 * msgs * NET.ps_alpha + frac * (push + pull) * NET.ps_beta + \
        4 * sum(tensors) / NET.mem_bw
    setup = sparse_setup(c, "ps-dedicated", 2, CommSetup(1e12, servers=1))
    assert comm_time("ps-dedicated", 2, tensors, NET, 0.0, 0.0, setup) == pytest.approx(want)


CM = ComputeModel(0.01, 0.0, 100.0, {"horovod": 0.002, "ps": 0.002})


def columns(c: RunConfig) -> dict:
    return predict(c, [1, 2], NET, CM, ["weak"])["scaling"]["weak"]


def test_sparse_setting_changes_only_its_own_strategy_columns() -> None:
    dense = columns(cfg("strategy.name=horovod"))
    ps = columns(cfg("strategy.name=ps", "strategy.ps.sparse_embeddings=on"))
    hvd = columns(gathered())
    for s in ("ring", "ring-overlap"):
        assert ps[s] == dense[s], f"a ps setting changed the {s} column"
        assert hvd[s][1]["comm_exposed_s"] != dense[s][1]["comm_exposed_s"]
    for s in ("ps-dedicated", "ps-sharded"):
        assert hvd[s] == dense[s], f"a Horovod setting changed the {s} column"
        assert ps[s][1]["comm_exposed_s"] < dense[s][1]["comm_exposed_s"]


def record(c: RunConfig) -> RunRecord:
    idle = [{"rank": r, "compute_s": 0.02, "idle_s": 0.0, "idle_ms_per_step": 0.0,
             "idle_steps": 0} for r in range(2)]
    return run_record(cfg=c, workers=2, ranks=2, words=400, measure={"steps": 2},
                      idle={"per_rank": idle}, words_per_s=1e4, hosts=["a"],
                      threads={"intra_op": 1})


def test_each_record_is_predicted_with_its_own_config() -> None:
    dense_cfg = cfg("strategy.name=horovod", "strategy.horovod.overlap=after-backward")
    gath_cfg = gathered("strategy.horovod.overlap=after-backward")
    tensors, rest = dense_tensors(dense_cfg)
    rows = validate([record(dense_cfg), record(gath_cfg)], tensors, NET, CM, 2 / 3)
    own, words, w = 0.01, 100.0, 2

    def want(comm: float) -> float:
        return w * words / (own + comm + CM.rest("horovod"))

    # np=2, one fused bucket (default threshold): the dense record allreduces every tensor,
    # the gathered one allreduces the rest and allgathers each table's distinct rows.
    a, b = NET.ring_alpha, NET.ring_beta
    dense_comm = 2 * a + sum(tensors) * b
    gath_comm = 2 * a + rest * b + 2 * (a + 3 * ROW * b)
    got = sorted(r["predicted_own_compute_no_overlap_words_per_s"] for r in rows)
    assert got == pytest.approx(sorted([want(dense_comm), want(gath_comm)]))


def hand_counts(c: RunConfig, n: int) -> tuple[list[int], dict[str, float], dict[str, float]]:
    """Per-rank batch sizes and, per table field, the mean non-padding positions and distinct
    ids (padding included) of the first ``SAMPLE_STEPS`` batches of ranks 0..n-1 of n, read
    from the runner's own corpus and plans."""
    sizes, tokens, distinct = [], {"src": [], "tgt_in": []}, {"src": [], "tgt_in": []}
    for r in range(n):
        corpus = data.load_corpus(c.data, "nmt", SRC, TGT, r, n)
        it = batching.make_plan(corpus, c.data, "nmt", r, n).batches()
        for _ in range(sb.SAMPLE_STEPS):
            b = next(it)
            sizes.append(len(b.src))
            for f in tokens:
                ids = getattr(b, f)
                tokens[f].append(int((ids != 0).sum()))
                distinct[f].append(len(set(ids.ravel().tolist())))
    return sizes, {f: float(np.mean(v)) for f, v in tokens.items()}, \
        {f: float(np.mean(v)) for f, v in distinct.items()}


REAL = ("data.batch_size=8", "data.synthetic.sentences_per_rank=64")


@pytest.mark.usefixtures("real_data")
def test_strong_scaling_rank_gathers_and_pushes_its_share_of_the_batch() -> None:
    # The config says weak: the strong table must still split the global batch of 8.
    n = 4
    hvd = gathered("strategy.horovod.overlap=hooks", *REAL)
    sizes, tokens, _ = hand_counts(replace_scaling(hvd, "strong"), n)
    assert set(sizes) == {2}  # 8 sentences over 4 ranks
    setup = sparse_setup(hvd, "ring", n, CommSetup(1e12), "strong")
    assert [g for g in setup.gathered if g] == \
        [int(tokens["src"] * ROW), int(tokens["tgt_in"] * ROW)]
    ps = cfg("strategy.name=ps", "strategy.ps.sparse_embeddings=on", "optim.name=momentum",
             *REAL)
    _, _, distinct = hand_counts(replace_scaling(ps, "strong"), n)
    tensors, rest = dense_tensors(ps)
    setup = sparse_setup(ps, "ps-sharded", n, CommSetup(1e12, servers=1), "strong")
    assert setup.push_bytes == pytest.approx(rest + (distinct["src"] + distinct["tgt_in"]) * ROW)
    assert setup.pull_bytes == sum(tensors)  # momentum: dense pull


def replace_scaling(c: RunConfig, scaling: str) -> RunConfig:
    return replace(c, data=replace(c.data, scaling=scaling))


@pytest.mark.usefixtures("real_data")
def test_strong_rank_count_beyond_the_batch_leaves_an_empty_row() -> None:
    # 9 ranks share a global batch of 8: that row is None (as dense), not a data-plan error.
    c = cfg("strategy.name=ps", "strategy.ps.sparse_embeddings=on", "data.scaling=strong",
            *REAL)
    table = predict(c, [2, 9], NET, CM, ["strong"])["scaling"]["strong"]
    for s in ("ps-dedicated", "ps-sharded", "ring"):
        assert table[s][1] is None
        assert table[s][0] is not None
