"""tbf's burst for a rate (tools/testbed/shaping.py): a timer tick of the rate, a floor."""

from __future__ import annotations

import pytest

from tools.testbed import shaping


def test_the_burst_holds_one_tick_of_the_rate() -> None:
    # 0.5 Gbit/s = 62.5 MB/s; at HZ = 250 a tick carries 250 000 bytes
    assert shaping.tbf_burst(0.5, hz=250) == 250_000
    assert shaping.tbf_burst(2.5, hz=250) == 1_250_000
    assert shaping.tbf_burst(2.5, hz=1000) == 312_500


def test_the_burst_holds_two_gso_packets_at_low_rates() -> None:
    assert shaping.tbf_burst(0.01, hz=250) == 128 << 10


@pytest.mark.parametrize("bad", [0, -0.5, "x", float("inf")])
def test_a_bad_rate_is_refused_in_one_line(bad: object) -> None:
    with pytest.raises(ValueError, match="positive number of Gbit/s") as e:
        shaping.tbf_burst(bad)  # type: ignore[arg-type]
    assert "\n" not in str(e.value)
