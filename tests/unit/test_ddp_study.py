"""The study side of DDP: the bucket sweep's recommendation (the paired rule of
``hvdscale.study.paired.recommend`` over DDP's 25 MiB default) and the report's Horovod-or-DDP
table."""

from __future__ import annotations

from hvdscale.records.run import RunRecord
from hvdscale.study.fusion import ddp as fusion_ddp
from hvdscale.study.report.native_tables import horovod_vs_native
from hvdscale.study.report.points import Point
from tests.records_fixture import run_record


def _recs(*wps: float) -> list[RunRecord | None]:
    return [run_record(words_per_s=w, strategy={"bucket_sizes": "1048576, 2000000"})
            for w in wps]


def test_a_bucket_size_is_recommended_only_when_every_round_beats_the_default() -> None:
    rows = [(None, _recs(200, 200, 200)), (1.0, _recs(90, 130, 95)),
            (5.0, _recs(110, 109, 109.5)), (25.0, _recs(100, 100, 100))]
    res = fusion_ddp.analyze(rows)
    assert res["best"] == "5MB" and res["recommendation"]["recommended"] == "5MB"
    assert res["best_over_defaults"]["min"] > 1.0
    assert res["table"][1]["buckets"] == 2
    # 1 MiB's best round beats 5 MiB's, but it straddles 1.0: not chosen on its median alone.
    noisy = fusion_ddp.analyze([(1.0, _recs(90, 130, 95)), (25.0, _recs(100, 100, 100))])
    assert noisy["recommendation"]["recommended"] is None
    assert noisy["best"] == "defaults (25MB)"
    assert "Recommendation: **defaults (25MB)**" in fusion_ddp.markdown(noisy, "t")


def _pt(strategy: str, ranks: int, wps: float) -> Point:
    return Point(strategy, ranks, ranks, 32, 20, 1.0, wps, 3, 0.1, "colocated")


def test_the_report_puts_horovod_beside_ddp_per_rank_count() -> None:
    series = {"torch / fused / horovod": [_pt("horovod", 1, 100), _pt("horovod", 2, 180)],
              "torch / fused / ddp": [_pt("ddp", 1, 100), _pt("ddp", 2, 200)],
              "torch / loop / ddp": [_pt("ddp", 2, 50)]}
    md = horovod_vs_native(series, list(series))
    assert "|torch|fused|horovod|ddp|2|180.0|200.0|0.900|" in md
    assert "loop" not in md  # no Horovod series of that implementation to compare with
    assert horovod_vs_native({"torch / fused / ddp": series["torch / fused / ddp"]},
                             ["torch / fused / ddp"]) == ""
