"""Signal from noise (issue 32): the busy-host rule on crafted records on both sides of its
line, and the report's medians, ranges, paired ratios and busy marks from crafted rounds."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from hvdscale.records.load import SLACK, HostLoad, is_busy, record_load
from hvdscale.records.run import RunRecord
from hvdscale.records.store import append_record, read_records
from hvdscale.study.paired.recommend import WITHIN_NOISE, compare, paired_summary
from hvdscale.study.report.points import collect
from hvdscale.study.report.report import write_report
from tests.records_fixture import run_record


def _load_rec(ranks: int, load1: float, cores: int | None = 2, threads: int = 1,
              hosts: list[str] | None = None) -> RunRecord:
    return run_record(ranks=ranks, rank_hosts=hosts or ["h"] * ranks, host_cores=cores,
                      threads={"intra_op": threads, "inter_op": 1, "mpi_yield_when_idle": None},
                      loadavg=[load1, 1.0, 1.0])


# (ranks, threads, cores, 1-minute load, busy): free = cores - (load - ranks x threads), busy
# when free + SLACK < ranks x threads. Each pair sits just either side of the line.
CASES = [
    (2, 1, 2, 2.0 + SLACK - 0.01, False),  # 2 ranks, quiet: their own load and a little
    (2, 1, 2, 2.0 + SLACK + 0.01, True),   # a bit more than half a core of others
    (1, 1, 2, 1.0 + 1 + SLACK - 0.01, False),  # 1 rank on 2 cores: a whole core may be taken
    (1, 1, 2, 1.0 + 1 + SLACK + 0.01, True),
    (1, 2, 4, 2.0 + 2 + SLACK - 0.01, False),  # threads count: 1 rank x 2 threads on 4 cores
    (1, 2, 4, 2.0 + 2 + SLACK + 0.01, True),
    (4, 1, 2, 0.0, True),                   # more rank x threads than cores: busy by itself
]


@pytest.mark.parametrize(("ranks", "threads", "cores", "load1", "busy"), CASES)
def test_the_busy_rule_on_both_sides_of_its_line(ranks: int, threads: int, cores: int,
                                                 load1: float, busy: bool) -> None:
    load = record_load(_load_rec(ranks, load1, cores, threads))
    assert load is not None and load.demand == ranks * threads
    assert load.busy is busy, load.describe()


def test_only_rank_zeros_host_counts_and_old_records_are_unknown() -> None:
    # 4 ranks on two hosts: rank 0's host runs 2 of them (its load is the one recorded).
    two_hosts = _load_rec(4, 2.4, hosts=["a", "a", "b", "b"])
    assert record_load(two_hosts) == HostLoad(2, 2, pytest.approx(0.4))
    assert not record_load(two_hosts).busy
    old = _load_rec(2, 9.0, cores=None)  # written before the host's cores were recorded
    assert record_load(old) is None
    assert is_busy(others=0.0, cores=2, demand=3)


def _rec(strategy: str, ranks: int, wps: float, rnd: int | None, load1: float = 0.5,
         framework: str = "torch") -> RunRecord:
    name = "demo" if rnd is None else f"demo-round{rnd + 1}"
    return run_record(f"name={name}", f"strategy.name={strategy}", f"framework={framework}",
                      "threads.intra_op=1", ranks=ranks, workers=ranks, words_per_s=wps,
                      window_s=1.0, step_time={"jitter": 0.001}, measure={"steps": 20},
                      rank_hosts=["h"] * ranks, host_cores=2,
                      threads={"intra_op": 1, "inter_op": 1}, loadavg=[load1 + ranks, 1, 1])


def _write(tmp_path: Path, busy_load: float) -> str:
    # 3 interleaved rounds; horovod at np=2 ran with `busy_load` cores of others in round 2.
    rounds = [(100, 104, 180, 205, 200), (90, 95, 150, 171, 180), (110, 112, 200, 228, 220)]
    for r, (h1, i1, h2, p2, i2) in enumerate(rounds):
        append_record(tmp_path, _rec("horovod", 1, h1, r))
        append_record(tmp_path, _rec("independent", 1, i1, r))
        append_record(tmp_path, _rec("horovod", 2, h2, r, busy_load if r == 1 else 0.1))
        append_record(tmp_path, _rec("ps", 2, p2, r))
        append_record(tmp_path, _rec("independent", 2, i2, r))
    return write_report(tmp_path)


def test_the_report_shows_medians_ranges_paired_speedups_and_verdicts(tmp_path: Path) -> None:
    md = _write(tmp_path, busy_load=0.1)
    (exp,) = collect(read_records(tmp_path)).values()
    assert exp.names == ["demo"]  # the round tags are not part of the experiment's name
    h2 = exp.series["torch / fused / horovod"][1]
    assert (h2.words_per_s, h2.wps_min, h2.wps_max, h2.repeats) == (180, 150, 200, 3)
    assert h2.wps_mad == pytest.approx(1.4826 * 20)
    # Paired speedups 1.8, 1.667, 1.818: their median and range, not 180 / 100.
    assert h2.speedup == pytest.approx(1.8) and h2.speedup_range["n"] == 3
    assert h2.speedup_range["min"] == pytest.approx(150 / 90)
    assert "|2|2|32|32 x 2 = 64|1.000|180.0|150.0-200.0|29.7|1.80 [1.67-1.82]|90.0|" in md
    # At np=2 ps is fastest (median 205): over independent 1.025, 0.95, 1.036: undecided,
    # with the rounds a decision would take.
    assert ("|2|torch / fused / ps|torch / fused / independent|1.003|0.846-1.189|3|"
            "undecided (x1.003 [0.846-1.189], 3 rounds): no decision in sight" in md)
    # ... over horovod 1.139, 1.140, 1.140: decided, with its interval (issue 62).
    assert ("|2|torch / fused / ps|torch / fused / horovod|1.140|1.137-1.142|3|"
            "A faster than B by 14.0% (95% interval 13.7 to 14.2%, 3 rounds)|" in md)
    assert "|1|torch / fused / independent|torch / fused / horovod|1.038|" in md
    # The side by side's "vs independent" is paired too, with its interval and verdict.
    assert "|1.003 [0.846-1.189], undecided at N=2|" in md
    assert "Busy host" not in md and "(busy)" not in md  # a quiet machine: no marks
    assert "|quiet|" in md


def test_a_busy_point_is_named_first_and_marked_in_every_table(tmp_path: Path) -> None:
    md = _write(tmp_path, busy_load=1.0)  # a whole core of others while 2 ranks ran
    # Named first, above the answer: it qualifies every figure, the answer's too.
    paras = md.split("\n\n")
    first = paras[1]
    assert first.startswith("**Busy host: 1 point ran with less than a core free")
    assert paras[2] == "## The answer"
    assert "torch / fused / horovod np=2 (busy in 1 of 3" in first and "--repeats" in first
    table = [ln for ln in md.splitlines() if ln.startswith("|2|2|32|")]
    assert [ln.endswith("|busy in 1 of 3|") for ln in table].count(True) == 1
    side = [ln for ln in md.splitlines() if ln.startswith("|torch|horovod|fused|")]
    assert len(side) == 1 and "(busy)" in side[0]
    assert "|2|torch / fused / ps|torch / fused / horovod (busy)|" in md  # A vs B
    rows = list(csv.DictReader(io.StringIO((tmp_path / "report.csv").read_text())))
    assert sorted(r["busy_runs"] for r in rows) == ["0", "0", "0", "0", "1"]


def test_paired_verdicts_come_from_one_place() -> None:
    s = paired_summary([1.1, 0.9, 1.2], [1.0, 1.0, 1.0])
    assert compare("a", "b", s).startswith(WITHIN_NOISE)
    # Faster in every round, but by 5 to 20 %: three rounds that scatter decide nothing
    # (issue 62: the old sign rule said "faster in every round" here).
    s = paired_summary([1.1, 1.05, 1.2, None], [1.0, 1.0, 1.0, 1.0])
    assert compare("a", "b", s).startswith("undecided (x1.115 [0.875-1.421], 3 rounds)")
    assert not s["consistent"]
    tight = paired_summary([1.10, 1.11, 1.105, 1.102], [1, 1, 1, 1])
    assert compare("a", "b", tight).startswith("a faster than b by 10.4% (95% interval")
    assert tight["consistent"]
    three = paired_summary([0.9, 0.91, 0.905], [1, 1, 1])
    assert compare("a", "b", three).startswith("b faster than a by 10.5%") and three["consistent"]
    same = paired_summary([1.001, 0.999, 1.0, 1.002, 0.998], [1] * 5)
    assert compare("a", "b", same).startswith("no difference larger than 2% between a and b")


def test_no_verdict_from_fewer_than_three_paired_rounds() -> None:
    """Issue 50: two rounds agreeing is not a verdict. Below 3 the ratio is given with how many
    more rounds a decision would take, never "faster"."""
    two = paired_summary([1.1, 1.05, None], [1.0, 1.0, 1.0])  # the third round failed on a
    assert not two["consistent"]
    assert compare("a", "b", two) == "undecided (x1.075, 2 rounds): about 5 more rounds to decide"
    one = compare("a", "b", paired_summary([2.0], [1.0]))
    assert one == "undecided (x2.000, 1 round): about 2 more rounds to decide"
    assert "faster" not in one
    assert compare("a", "b", paired_summary([1.1, 0.9], [1, 1])).startswith(WITHIN_NOISE)
