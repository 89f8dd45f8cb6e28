"""evidence/many_cores_report.py's table says no negative cause: a comm or idle reading below zero
(noise against the one-rank baseline) is shown as 0 and said under the table."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "evidence"))
from many_cores_report import render


def _row(comm: float, idle: float) -> dict:
    return {"strategy": "ddp", "n": 2, "words_per_s": 100.0, "min": 90.0, "max": 110.0,
            "rounds": 2, "speedup": 1.9, "efficiency": 0.95,
            "breakdown_ms": {"compute": 50.0, "comm": comm, "idle": idle}}


def test_a_negative_reading_is_shown_as_zero_and_said() -> None:
    text = render("demo", [_row(-1.4, 0.3)], [])
    assert "| ddp | 2 | 100 | 90-110 | 1.90 | 0.95 | 50.0 | 0.0 | 0.3 | 2 |" in text
    assert "-1.4" not in text and "below zero (noise): shown as 0.0" in text


def test_no_note_without_a_negative_reading() -> None:
    text = render("demo", [_row(1.4, 0.3)], [])
    assert "| 50.0 | 1.4 | 0.3 | 2 |" in text and "below zero" not in text
