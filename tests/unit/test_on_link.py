"""``predict`` held to a link's points (hvdscale.study.predict.on_link, issue 63): the fastest
link's measured step carried to a slower link, and how the rows name a series."""

from __future__ import annotations

import pytest

from hvdscale.study.predict.on_link import carried, series
from tests.records_fixture import run_record


def test_the_fastest_links_communication_is_carried_by_the_rate_ratio() -> None:
    fast = {"compute": 0.050, "idle": 0.005, "g1": 0.002, "comm": 0.020,
            "words_per_step": 1600.0, "step": 0.077, "words": 800.0}
    # 2.4 -> 0.96 Gbit/s: the exposed communication takes 2.5 times as long, the rest stays
    assert carried(fast, 2.4, 0.96) == pytest.approx(1600.0 / (0.057 + 0.050))
    assert carried(fast, 1.0, 1.0) == pytest.approx(1600.0 / 0.077)


def test_a_parameter_server_with_two_servers_is_its_own_series() -> None:
    assert series(run_record("strategy.name=ps", ranks=2)) == "ps"
    assert series(run_record("strategy.name=ps", "strategy.ps.num_servers=2", ranks=2)) == "ps2"
    assert series(run_record("strategy.name=horovod", ranks=2)) == "horovod"
