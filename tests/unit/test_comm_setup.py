"""A record is costed with its own strategy's setup (issue 63): Horovod's ``after-backward``
reduces the whole flat buffer once after backward (nothing hides behind backward, whatever the
fusion threshold), DDP reduces its buckets during backward, and ``independent`` sends nothing;
overlap counts only where the ranks had a core for the communication thread, and the compute
at n is what the independent replicas measured there.
"""

from __future__ import annotations

import pytest

from hvdscale.config import config_from_dict
from hvdscale.study.predict.compute import compute_from_records, has_comm_core
from hvdscale.study.predict.cost import CommSetup, comm_time, ring_cost
from hvdscale.study.predict.inputs import Network
from tests.records_fixture import run_record

NET = Network(ring_alpha=1e-4, ring_beta=1e-8, ring_overhead=0.0, ps_alpha=1e-4, ps_beta=1e-8,
              mem_bw=None, source="test")
TENSORS = [4 << 20, 1 << 20, 2 << 20, 1 << 20]  # 8 MiB in all
COMPUTE = 0.5  # s: long enough that an overlapped reduction hides almost all of its cost


def _setup(strategy: dict) -> CommSetup:
    return CommSetup.of_record(config_from_dict({"strategy": strategy}))


def test_after_backward_horovod_exposes_one_reduction_of_the_whole_buffer() -> None:
    setup = _setup({"name": "horovod", "horovod": {"overlap": "after-backward",
                                                   "fusion_threshold_mb": 2}})
    assert not setup.overlap
    got = comm_time("horovod", 2, TENSORS, NET, COMPUTE, 2 / 3, setup)
    assert got == pytest.approx(ring_cost(sum(TENSORS), 2, NET))


def test_hooks_horovod_hides_its_reduction_behind_backward() -> None:
    setup = _setup({"name": "horovod", "horovod": {"overlap": "hooks"}})
    hidden = comm_time("horovod", 2, TENSORS, NET, COMPUTE, 2 / 3, setup)
    # the earlier gradients are reduced while backward runs; the first parameter's, ready
    # last, is all that shows
    assert setup.overlap and hidden == pytest.approx(ring_cost(TENSORS[0], 2, NET))


def test_ddp_costs_its_buckets_overlapped_and_independent_sends_nothing() -> None:
    ddp = _setup({"name": "ddp", "ddp": {"bucket_cap_mb": 1}})
    assert ddp.overlap and ddp.threshold == 1 << 20
    # without compute to hide behind, every bucket's latency and bytes show: at a 1-MiB cap
    # each tensor (backward order) is a bucket of its own
    exposed = comm_time("ddp", 2, TENSORS, NET, 0.0, 2 / 3, ddp)
    assert exposed == pytest.approx(sum(ring_cost(b, 2, NET) for b in TENSORS))
    assert comm_time("independent", 2, TENSORS, NET, 0.0, 2 / 3,
                     _setup({"name": "independent"})) == 0.0


@pytest.mark.parametrize(("threads", "host_cores", "hosts", "ranks", "free"), [
    ({"cores": 1}, 2, ["a", "b"], 2, False),   # the shaped testbed: each host pinned to a core
    ({"cores": 2}, 4, ["a"], 2, True),         # bound to 2 cores each: one for communication
    ({}, 2, ["a"], 2, False),                  # unbound, 2 ranks on 2 cores
    ({}, 16, ["a"], 2, True),                  # unbound, 2 ranks on 16 cores
    ({}, None, ["a"], 2, True),                # no cores recorded: as before, overlapped
])
def test_overlap_counts_only_where_a_core_is_free_for_the_communication_thread(
        threads: dict, host_cores: int | None, hosts: list[str], ranks: int,
        free: bool) -> None:
    rec = run_record("strategy.name=horovod", ranks=ranks, hosts=hosts, host_cores=host_cores,
                     threads=threads)
    assert has_comm_core(rec) is free


def test_compute_at_n_is_what_the_independent_replicas_measured_there() -> None:
    def rec(name: str, ranks: int, compute_s: float) -> object:
        steps = 20
        per_rank = [{"rank": i, "idle_s": 0.0, "idle_ms_per_step": 0.0, "idle_steps": 0,
                     "compute_s": compute_s, "batches": steps} for i in range(ranks)]
        return run_record(f"strategy.name={name}", f"measure.steps={steps}", ranks=ranks,
                          words_per_s=1000.0 * ranks,
                          idle={"synchronous": True, "steps": steps, "per_rank": per_rank})

    recs = [rec("horovod", 1, 1.0), rec("independent", 1, 1.2), rec("independent", 2, 1.5)]
    cm = compute_from_records(recs, NET, TENSORS)
    # the 1-worker fit is the median of the 1-rank records (1.1 s a window); at 2 workers,
    # the replicas' own 1.5 s: a slowdown of 1.5 / 1.1
    assert cm.compute(cm.words_per_step) * 20 == pytest.approx(1.1)
    assert cm.slowdown == {2: pytest.approx(1.5 / 1.1)}
    assert cm.compute_at(cm.words_per_step, 2) * 20 == pytest.approx(1.5)
    assert cm.compute_at(cm.words_per_step, 4) == cm.compute(cm.words_per_step)  # unmeasured
