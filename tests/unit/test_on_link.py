"""``predict`` held to a link's points (issue 63): how the rows name a series
(hvdscale.study.predict.on_link), and a fit carried to another link (``predict --fit
--fit-link``, hvdscale.study.predict.carry)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hvdscale.errors import HvdscaleError
from hvdscale.study.predict.carry import carry_fit, parse_fit_link
from hvdscale.study.predict.inputs import Network
from hvdscale.study.predict.on_link import series
from tests.records_fixture import run_record

FAST = Network(ring_alpha=1e-5, ring_beta=1e-9, ring_overhead=0.0, ps_alpha=1e-5, ps_beta=2e-9,
               mem_bw=None, source="fast")
SLOW = Network(ring_alpha=1e-5, ring_beta=4e-9, ring_overhead=0.0, ps_alpha=1e-5, ps_beta=1e-8,
               mem_bw=None, source="slow")


def _fit(family: str, comm: float, total: float) -> dict:
    step = 0.050 + comm + 0.002 + 0.001
    return {"strategies": {"s": {"family": family, "predictions": [
        {"n": 2, "compute_s": 0.050, "comm_s": comm, "comm_total_s": total, "idle_s": 0.002,
         "g1_s": 0.001, "step_s": step, "words_per_s": 1600 / step,
         "interval": [1600 / (step + 0.004), 1600 / (step - 0.004)]}]}}}


def test_a_fit_carried_to_a_slower_link_scales_its_communication_only() -> None:
    # ring family: x4; 10 ms of the 20 ms total were hidden behind backward and stay hidden
    p = carry_fit(_fit("ring", 0.010, 0.020), FAST, SLOW)["strategies"]["s"]["predictions"][0]
    assert p["comm_total_s"] == pytest.approx(0.080) and p["comm_s"] == pytest.approx(0.070)
    assert p["step_s"] == pytest.approx(0.123) and p["words_per_s"] == pytest.approx(1600 / 0.123)
    lo, hi = p["interval"]
    assert lo == pytest.approx(1600 / 0.127) and hi == pytest.approx(1600 / 0.119)
    # the parameter server's family by the ps transport's ratio: x5
    q = carry_fit(_fit("ps", 0.010, 0.010), FAST, SLOW)["strategies"]["s"]["predictions"][0]
    assert q["comm_s"] == pytest.approx(0.050)


def test_a_bad_fit_link_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(HvdscaleError, match="--fit-link needs FROM,TO"):
        parse_fit_link("only-one")
    with pytest.raises(HvdscaleError, match="commbench"):
        parse_fit_link(f"{tmp_path},{tmp_path}")


def test_a_parameter_server_with_two_servers_is_its_own_series() -> None:
    assert series(run_record("strategy.name=ps", ranks=2)) == "ps"
    assert series(run_record("strategy.name=ps", "strategy.ps.num_servers=2", ranks=2)) == "ps2"
    assert series(run_record("strategy.name=horovod", ranks=2)) == "horovod"


def test_fit_link_without_a_fit_is_refused() -> None:
    from hvdscale.study.predict.run import PredictSpec, run_predict

    with pytest.raises(HvdscaleError, match="give it with --fit RESULTS"):
        run_predict(str(Path(__file__).resolve().parents[2] / "configs/demo.yaml"), [],
                    PredictSpec(ranks="2", latency="5us", bandwidth="1Gbit", fit_link="a,b"))
