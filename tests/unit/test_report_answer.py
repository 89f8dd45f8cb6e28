"""The answer on top of the report (issue 62): at most 15 lines before the tables, with each
strategy's speedup and efficiency with intervals, the decided verdicts in plain words, where the
missing speedup went (or "not separable here") and a next step marked measured or untested."""

from __future__ import annotations

from pathlib import Path

from tests.unit.test_noise import _write
from tests.unit.test_report_rounds import _report


def _answer(md: str) -> list[str]:
    lines = md.splitlines()
    start = lines.index("## The answer")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("## demo"))
    return lines[start:end]


def test_the_report_opens_with_its_answer(tmp_path: Path) -> None:
    md = _write(tmp_path, busy_load=0.1)
    assert md.splitlines()[2] == "## The answer"  # right under the title
    top = _answer(md)
    assert len([ln for ln in top if ln]) <= 15 and len(top) <= 15
    body = "\n".join(top)
    # Paired speedups 1.8, 1.667, 1.818: their geometric mean and 95 % interval, and the
    # efficiency's.
    assert "torch / fused / horovod 1.76 [1.48-2.09], 88% [74-104]" in body
    assert ("decided: torch / fused / ps faster than torch / fused / horovod by 14.0% (95% "
            "interval 13.7 to 14.2%, 3 rounds) (2 undecided" in body)
    assert "where torch horovod's missing 12 points went: mostly compute slowdown" in body
    assert body.rstrip().endswith('"How verdicts are decided").')
    assert "(untested)" in body and "next step: fewer compute threads" in body


def test_one_round_decides_nothing_and_separates_no_cause(tmp_path: Path) -> None:
    top = "\n".join(_answer(_report(tmp_path, rounds=1)))
    assert "(no interval from 1 round)" in top
    assert "no comparison decided yet" in top
    assert "not separable here (one run: no spread to tell a cause from the noise)" in top


def test_each_next_step_names_a_config_key_and_knows_when_it_was_tried() -> None:
    import re

    from hvdscale.config import load_config
    from hvdscale.study.report.answer import NEXT_STEP

    plain = load_config(None)  # the defaults try none of the steps
    assert not any(tried(plain) for _, tried in NEXT_STEP.values())
    trying = {"straggler_idle": ["data.bucketing.enabled=true", "data.bucketing.mode=global"],
              "exposed_comm": ["strategy.horovod.fusion_threshold_mb=32"],
              "compute_slowdown": ["threads.intra_op=2"]}
    for cause, (step, tried) in NEXT_STEP.items():
        assert tried(load_config(None, trying[cause])), cause
        # Every `key: value` the advice names is one the config takes.
        for key, value in re.findall(r"`([a-z_.]+): ([a-z0-9_]+)`", step):
            load_config(None, ["data.bucketing.enabled=true", f"{key}={value}"])
