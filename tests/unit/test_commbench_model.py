"""commbench's definitions and fits, and predict's costs, on hand-computable cases."""

from __future__ import annotations

import numpy as np
import pytest

from hvdscale.errors import HvdscaleError
from hvdscale.study import commbench as cb
from hvdscale.study import predict as pr


def test_sizes_parse_ranges_lists_and_reject_bad_ones() -> None:
    assert cb.parse_sizes("4B..64B") == [4, 8, 16, 32, 64]
    assert cb.parse_sizes("4B..256MB")[-1] == 256 << 20 and len(cb.parse_sizes("4B..256MB")) == 27
    assert cb.parse_sizes("1KB..1MB:x4") == [1024, 4096, 16384, 65536, 262144, 1 << 20]
    assert cb.parse_sizes("16MB,1MB,64MB") == [1 << 20, 16 << 20, 64 << 20]
    for bad in ("3B", "10XB", "", "1MB..4B", "4B..1MB:x1"):
        with pytest.raises(HvdscaleError, match="--sizes"):
            cb.parse_sizes(bad)
    with pytest.raises(HvdscaleError, match="unknown transport"):
        cb.parse_transports("mpi4py,nccl")


def test_busbw_factors_follow_their_definitions() -> None:
    assert cb.allreduce_factor(2) == 1.0 and cb.allreduce_factor(8) == 1.75
    # One colocated server, 2 workers: rank 1 pushes the whole model to rank 0 (and pulls it).
    assert cb.ps_phase(2, 1, "colocated") == (1, 1.0) and cb.ps_factor(2, 1, "colocated") == 2.0
    # Sharded over all 4 ranks: each rank sends 3 quarters and receives 3 quarters per phase,
    # the same bytes as a ring allreduce.
    assert cb.ps_phase(4, 4, "colocated") == (3, 0.75)
    assert cb.ps_factor(4, 4, "colocated") == cb.allreduce_factor(4)
    # 2 dedicated servers, 4 workers: each server receives 4 half-models.
    assert cb.ps_phase(4, 2, "dedicated") == (4, 2.0)
    pts = cb.summarize_points([{"bytes": 1 << 20, "times_s": [3e-3, 1e-3, 2e-3]}], 1.5)
    assert pts[0]["time_s"] == 2e-3
    assert pts[0]["algbw_GBps"] == pytest.approx((1 << 20) / 2e-3 / 1e9)
    assert pts[0]["busbw_GBps"] == pytest.approx(1.5 * pts[0]["algbw_GBps"])


def test_fit_recovers_alpha_beta_and_finds_the_break() -> None:
    sizes = [4 << k for k in range(20)]
    t = [5e-6 + s / 2e9 for s in sizes]
    f = cb.fit_alpha_beta(sizes, t)
    assert f["a_s"] == pytest.approx(5e-6, rel=1e-6)
    assert f["b_s_per_byte"] == pytest.approx(0.5e-9, rel=1e-6)
    assert f["off_line"] == [] and f["break"] is None and f["a_se_s"] < 1e-9
    # Above 64 KB the bandwidth drops 4x (a protocol switch): one line cannot describe it.
    t2 = [5e-6 + s / 2e9 if s <= 65536 else 5e-6 + 65536 / 2e9 + (s - 65536) / 0.5e9
          for s in sizes]
    f2 = cb.fit_alpha_beta(sizes, t2)
    assert f2["off_line"] and f2["break"] is not None
    assert f2["break"]["below_bytes"] in (32768, 65536, 131072)
    assert f2["break"]["above"]["b_s_per_byte"] == pytest.approx(2e-9, rel=0.1)
    # Link parameters at n=2: ring 2(n-1) = 2 hops, factor 1.
    link = cb.link_parameters("mpi4py", f, 2, 1, "colocated")
    assert link["alpha_s"] == pytest.approx(2.5e-6) and link["beta_s_per_byte"] == \
        pytest.approx(0.5e-9)
    # A ping-pong: two messages of the size, one way at a time.
    pp = cb.link_parameters("p2p", f, 2, 1, "colocated")
    assert pp["alpha_s"] == pytest.approx(2.5e-6) and pp["beta_s_per_byte"] == \
        pytest.approx(0.25e-9)


def test_p2p_is_asked_for_and_needs_two_ranks(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert "p2p" not in cb.parse_transports("horovod-mpi,horovod-gloo,mpi4py,ps")
    assert cb.parse_transports("p2p") == ["p2p"]
    with pytest.raises(HvdscaleError, match="p2p needs --np 2"):
        cb.run_commbench(cb.CommbenchSpec(1, "1MB", "p2p"), tmp_path)


NET = pr.Network(ring_alpha=1e-6, ring_beta=1e-9, ring_overhead=0.0, ps_alpha=1e-6,
                 ps_beta=1e-9, mem_bw=None, source="test")


def test_textbook_ring_and_parameter_server_costs() -> None:
    m = 1e6
    # Ring allreduce over 4 ranks: 2(n-1) alpha + 2(n-1)/n M beta.
    assert pr.ring_cost(m, 4, NET) == pytest.approx(6e-6 + 1.5e-3)
    assert pr.ring_cost(m, 1, NET) == 0.0
    # PS, 2 dedicated servers, 4 workers: each server takes 4 messages of M/2 per phase.
    assert pr.ps_time(m, 4, 2, "dedicated", NET) == pytest.approx(2 * (4e-6 + 2e-3))
    # Colocated sharded over 4: 3 messages and 3/4 M per phase: the ring's bandwidth term.
    assert pr.ps_time(m, 4, 4, "colocated", NET) == pytest.approx(6e-6 + 1.5e-3)
    # The server update at a memory bandwidth: (W + 2) shard bytes.
    net = pr.Network(1e-6, 1e-9, 0.0, 1e-6, 1e-9, 1e9, "t")
    assert pr.ps_time(m, 4, 2, "dedicated", net) == pytest.approx(2 * (4e-6 + 2e-3) + 6 * 5e5 / 1e9)


def test_fusion_and_overlap() -> None:
    tensors = [400, 300, 200, 100]  # parameter order; backward reaches 100 first
    assert pr.fuse(list(reversed(tensors)), 500) == [300, 300, 400]
    no = pr.ring_exposed(tensors, 2, NET, 500, 1.0, 0.5, overlap=False)
    assert no == pytest.approx(sum(pr.ring_cost(b, 2, NET) for b in (300, 300, 400)))
    # Backward far longer than communication: only the last tensor's allreduce is exposed.
    ov = pr.ring_exposed(tensors, 2, NET, 500, 10.0, 0.5, overlap=True)
    assert ov == pytest.approx(pr.ring_cost(400, 2, NET))
    # No backward to hide behind: everything is exposed, fused as it is ready (all at once).
    assert pr.ring_exposed(tensors, 2, NET, 2000, 1.0, 0.0, overlap=True) == \
        pytest.approx(pr.ring_cost(1000, 2, NET))


def test_units_and_ranks() -> None:
    assert pr.parse_latency("5us") == pytest.approx(5e-6)
    assert pr.parse_bandwidth("25Gbit") == pytest.approx(25e9 / 8)
    assert pr.parse_bandwidth("3GB/s") == pytest.approx(3e9)
    assert pr.parse_ranks("1,2,4,...,64") == [1, 2, 4, 8, 16, 32, 64]
    for bad in ("0", "a", "...,4", ""):
        with pytest.raises(HvdscaleError):
            pr.parse_ranks(bad)
    with pytest.raises(HvdscaleError, match="--latency"):
        pr.parse_latency("fast")
    assert np.isclose(pr.parse_bandwidth("100Gbit"), 12.5e9)


def test_summary_holds_per_rank_times_and_breakdown_sums_exactly() -> None:
    """meter.summarize's rank_times, split by breakdown.split_loss on hand-made timings."""
    from hvdscale.core.meter import summarize
    from hvdscale.study.report.breakdown import PARTS, split_loss
    from tests.records_fixture import run_record

    def rank(r: int, steps: list[float], compute: list[float], words: int, window: float) -> dict:
        return {"rank": r, "words": words, "loss_tokens": 0, "padded_tokens": words,
                "sentences": 1, "loss_sum": 0.0, "window_s": window, "step_times": steps,
                "warmup_times": [], "compute_times": compute, "idle_steps": 0, "batches": 2,
                "step_words": [words // len(steps)] * len(steps),
                "cpu_s": window}

    one = summarize([rank(0, [1.0, 1.0], [0.8, 0.8], 200, 2.0)], [0])
    assert one["rank_times"] == [{"rank": 0, "words": 200, "window_s": 2.0, "steps": 2,
                                  "step_s": 2.0, "compute_s": 1.6}]
    two = summarize([rank(0, [1.5, 1.5], [1.0, 0.9], 200, 3.1),
                     rank(1, [1.5, 1.5], [0.9, 1.3], 200, 3.1)], [0, 1])
    base = run_record(ranks=1, **one)  # the meter's fields, as the record holds them
    rec = run_record(ranks=2, **two)
    b = split_loss(rec, [base])
    # 1 worker: 100 words/s, 0.008 s compute per word, 0.2 s per step besides compute.
    # 2 workers: 400 words in 3.1 s against 2 s at linear speedup.
    assert b["loss_pct"] == pytest.approx(100 * (3.1 - 2.0) / 3.1)
    assert b["efficiency_pct"] == pytest.approx(100 - b["loss_pct"])
    assert sum(b[k] for k in PARTS) == pytest.approx(b["loss_pct"])
    # compute: ranks spent 1.9 and 2.2 s against 1.6 s each: mean 0.45 s slower.
    assert b["seconds"]["compute_slowdown"] == pytest.approx(0.45)
    # idle: rank 0 waits 0.4 s in step 2, rank 1 0.1 s in step 1: mean 0.25 s.
    assert b["seconds"]["straggler_idle"] == pytest.approx(0.25)
    # communication: 3.0 s of steps - compute - idle, less 2 steps x 0.2 s: 0.3 s on each rank.
    assert b["seconds"]["exposed_comm"] == pytest.approx(0.3)
    assert b["seconds"]["unexplained"] == pytest.approx(1.1 - 0.45 - 0.25 - 0.3)
    assert b["dominant"] == "compute_slowdown"
