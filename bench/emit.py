"""Shared tail of the benchmark scripts: stamp the load, label the result quiet or not, print it
and, if asked, save it as JSON.

Every raw result carries the 1/5/15-minute load average at the moment it is written
(``loadavg_emit``) next to whatever loads the bench recorded itself (per run, per round: keys
named ``load...`` or ``...loadavg...``, as a [1, 5, 15] triple or a 1-minute figure), and a
``quiet`` label computed here from all of them: quiet only if every recorded 1-minute load is
at most ``quiet_load`` (2.5 on this 2-core machine unless the result says otherwise).
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
from pathlib import Path
from typing import Any

QUIET_LOAD = 2.5
"""1-minute load average at or below which a run counts as quiet (2 cores, 2 ranks)."""
_LOAD_KEY = re.compile(r"(^|_)load(avg)?(_|$)|loadavg")


def _is_triple(v: Any) -> bool:
    return (isinstance(v, list | tuple) and len(v) == 3
            and all(isinstance(x, int | float) and not isinstance(x, bool) for x in v))


def _one_minute(v: Any) -> list[float]:
    """The 1-minute loads in a recorded load value (a triple, a number, or lists/dicts of them)."""
    if isinstance(v, bool) or v is None:
        return []
    if isinstance(v, int | float):
        return [float(v)] if math.isfinite(v) else []
    if _is_triple(v):
        return [float(v[0])]
    if isinstance(v, dict):
        return [x for item in v.values() for x in _one_minute(item)]
    if isinstance(v, list | tuple):
        return [x for item in v for x in _one_minute(item)]
    return []


def recorded_loads(obj: Any) -> list[float]:
    """Every 1-minute load average recorded anywhere in ``obj`` (under a load key)."""
    out: list[float] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(k, str) and _LOAD_KEY.search(k) and not k.startswith("quiet"):
                out += _one_minute(v)
            else:
                out += recorded_loads(v)
    elif isinstance(obj, list | tuple):
        for item in obj:
            out += recorded_loads(item)
    return out


def label_load(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` with ``loadavg_emit`` (now), ``load_1min_max`` and ``quiet`` (computed from
    every recorded 1-minute load; ``result['quiet_load']`` overrides the 2.5 threshold)."""
    out = dict(result)
    out["loadavg_emit"] = list(os.getloadavg())
    loads = recorded_loads(out)
    limit = float(out.get("quiet_load", QUIET_LOAD))
    out["quiet_load"] = limit
    out["load_1min_max"] = max(loads)
    out["quiet"] = all(x <= limit for x in loads)
    return out


def emit(result: dict[str, Any], json_path: str = "") -> dict[str, Any]:
    """Label the load (``label_load``), print the result as indented JSON, write it to
    ``json_path`` when one is given; returns the labelled result."""
    out = label_load(result)
    text = json.dumps(out, indent=1)
    print(text)
    if json_path:
        Path(json_path).write_text(text)
    return out


def paired(a: list[float], b: list[float]) -> dict[str, float] | None:
    """Per-round ratios a / b of two variants measured in the same rounds: median, min, max, n."""
    r = [x / y for x, y in zip(a, b, strict=False) if y]
    if not r:
        return None
    return {"median": statistics.median(r), "min": min(r), "max": max(r), "n": len(r)}


def words_per_s(runs: list[dict[str, Any]]) -> list[float]:
    """The words/s of each run, in round order."""
    return [r["words_per_s"] for r in runs]
