"""Which exactness cases really ran, per strategy: a run whose every Horovod case was skipped
(two ranks on one GPU, a Horovod built with NCCL) must not read as "Horovod is exact there".

``tests/exactness.py``'s ``distributed`` notes the strategy each test trains; these hooks
(registered by ``tests/conftest.py``) count each such test as ran (passed or failed) or skipped,
print one line per strategy at the end, write them as JSON to ``HVDSCALE_EXACTNESS_SUMMARY``
(rank 0, when set), and, with the replicas on a GPU (``HVDSCALE_TEST_DEVICE=cuda``), fail the
session when a strategy had cases but none of them ran, unless ``HVDSCALE_EXACTNESS_ALLOW_UNRUN``
(comma-separated strategies) says that is expected on this machine; it is still printed.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

_TOUCHED: list[str] = []
"""Strategies the running test trained (or tried to) so far."""
COUNTS: dict[str, dict[str, Any]] = {}
"""Per strategy: passed, failed, skipped counts and the skip reasons seen."""


def note_strategy(name: str) -> None:
    """Record that the running test trains ``name`` (called before any skip can happen)."""
    _TOUCHED.append(name)


def _device() -> str:
    return os.environ.get("HVDSCALE_TEST_DEVICE", "cpu")


def _rank() -> int:
    for var in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "HOROVOD_RANK"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 0


def count(strategies: set[str], outcome: str, reason: str = "") -> None:
    """Add one test's ``outcome`` (passed, failed, skipped) to each of ``strategies``."""
    for s in strategies:
        c = COUNTS.setdefault(s, {"passed": 0, "failed": 0, "skipped": 0, "reasons": []})
        c[outcome] += 1
        if reason and reason not in c["reasons"]:
            c["reasons"].append(reason)


def summary_lines() -> list[str]:
    """One line per strategy: cases ran (passed + failed) and skipped, with the skip reason."""
    out = []
    for s, c in sorted(COUNTS.items()):
        ran = c["passed"] + c["failed"]
        why = f" (skipped: {c['reasons'][0][:160]})" if c["reasons"] else ""
        out.append(f"exactness on {_device()}: {s}: {ran} case(s) ran ({c['passed']} passed, "
                   f"{c['failed']} failed), {c['skipped']} skipped{why}")
    return out


def unrun() -> list[str]:
    """Strategies whose every case was skipped, less those allowed to be."""
    allowed = {s.strip() for s in os.environ.get("HVDSCALE_EXACTNESS_ALLOW_UNRUN", "").split(",")}
    return sorted(s for s, c in COUNTS.items()
                  if c["passed"] + c["failed"] == 0 and s not in allowed)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Attribute each test's outcome to the strategies it trained."""
    if report.when == "setup" and not report.skipped:
        _TOUCHED.clear()
        return
    if report.when not in ("setup", "call"):
        return
    touched = set(_TOUCHED)
    _TOUCHED.clear()
    if not touched:
        return
    reason = ""
    if report.skipped and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2]).removeprefix("Skipped: ")
    outcome = "skipped" if report.skipped else ("passed" if report.passed else "failed")
    count(touched, outcome, reason)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write the JSON summary; on a GPU, fail when a strategy's cases all skipped."""
    if not COUNTS:
        return
    path = os.environ.get("HVDSCALE_EXACTNESS_SUMMARY")
    if path and _rank() == 0:
        doc = {"device": _device(), "strategies": {
            s: {"ran": c["passed"] + c["failed"], **c} for s, c in sorted(COUNTS.items())},
            "unrun": unrun()}
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
    if _device() == "cuda" and unrun() and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the per-strategy lines (and why the session failed, if it did for this)."""
    lines = summary_lines()
    if not lines:
        return
    terminalreporter.section("exactness cases per strategy")
    for line in lines:
        terminalreporter.write_line(line)
    if _device() == "cuda" and unrun():
        terminalreporter.write_line(
            f"exactness on cuda: FAILED: no case of {', '.join(unrun())} ran on the GPU (set "
            "HVDSCALE_EXACTNESS_ALLOW_UNRUN to accept that on this machine)")
