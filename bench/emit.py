"""Shared tail of the benchmark scripts: stamp the load, label the result quiet or not, print it
and, if asked, save it as JSON.

Every raw result carries the 1/5/15-minute load average at the moment it is written
(``loadavg_emit``) next to whatever loads the bench recorded itself (per run, per round: keys
named ``load...`` or ``...loadavg...``), and a ``quiet`` label computed here from all of them:
quiet only if every recorded 1-minute load is at most ``QUIET_LOAD`` (2.5 on this 2-core
machine) and the bench recorded a load during the run (one reading at the end says nothing
about the run: then ``quiet`` is false and ``quiet_basis`` says why). A bench run with another
``--quiet_load`` labels its own result with it when writing; a raw file read back
(tools/checks/check_benchmarks.py) is judged by ``QUIET_LOAD`` alone, whatever threshold it stores.

A [1, 5, 15] triple (``os.getloadavg()``) is read as one only under a key that names one:
``...loadavg...``, or ``load_before``/``load_after`` as bench_ddp, bench_mwms and bench_sparse
write them. Under any other load key every number is a 1-minute load, so three per-round
figures are not mistaken for a triple. Keys holding a summary (``...max...``, ``quiet...``)
are not readings and are skipped.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

QUIET_LOAD = 2.5
"""1-minute load average at or below which a run counts as quiet (2 cores, 2 ranks)."""
_LOAD_KEY = re.compile(r"(^|_)load(avg)?(_|$)|loadavg")
_TRIPLE_KEY = re.compile(r"loadavg|^load_(before|after)$")
"""Load keys whose [a, b, c] values are os.getloadavg() triples (1-, 5-, 15-minute)."""
_EMIT_KEY = "loadavg_emit"


def _is_triple(v: Any) -> bool:
    return (isinstance(v, list | tuple) and len(v) == 3
            and all(isinstance(x, int | float) and not isinstance(x, bool) for x in v))


def _one_minute(v: Any, triples: bool) -> list[float]:
    """The 1-minute loads in a recorded load value (a number, lists/dicts of them, and, when
    ``triples`` (the key names a load average), [1, 5, 15] triples)."""
    if isinstance(v, bool) or v is None:
        return []
    if isinstance(v, int | float):
        return [float(v)] if math.isfinite(v) else []
    if triples and _is_triple(v):
        return _one_minute(v[0], triples)
    if isinstance(v, dict):
        return [x for item in v.values() for x in _one_minute(item, triples)]
    if isinstance(v, list | tuple):
        return [x for item in v for x in _one_minute(item, triples)]
    return []


def recorded_loads(obj: Any, skip: tuple[str, ...] = ()) -> list[float]:
    """Every 1-minute load average recorded anywhere in ``obj`` (under a load key, except the
    keys in ``skip`` and summary keys)."""
    out: list[float] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if not isinstance(k, str) or not _LOAD_KEY.search(k):
                out += recorded_loads(v, skip)
            elif k not in skip and "max" not in k and not k.startswith("quiet"):
                out += _one_minute(v, bool(_TRIPLE_KEY.search(k)))
    elif isinstance(obj, list | tuple):
        for item in obj:
            out += recorded_loads(item, skip)
    return out


def quiet_label(result: dict[str, Any], limit: float = QUIET_LOAD) -> dict[str, Any]:
    """``load_1min_max``, ``quiet``, ``quiet_load`` and ``quiet_basis`` of a result, computed
    from its recorded loads alone against ``limit`` (also for a raw file read back: nothing
    stored is trusted, a ``quiet_load`` stored in the result included)."""
    loads = recorded_loads(result)
    during = recorded_loads(result, skip=(_EMIT_KEY,))
    if not during:
        basis = ("one reading at the end (loadavg_emit), none during the run" if loads
                 else "no load recorded")
        quiet = False
    else:
        basis = f"{len(loads)} recorded 1-minute loads"
        quiet = all(x <= limit for x in loads)
    return {"load_1min_max": max(loads, default=math.nan), "quiet": quiet,
            "quiet_load": limit, "quiet_basis": basis}


def label_load(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` with ``loadavg_emit`` (now) and ``quiet_label``'s fields (``quiet`` only if
    the run recorded its own loads and every one is <= ``result['quiet_load']``, 2.5)."""
    out = dict(result)
    out[_EMIT_KEY] = list(os.getloadavg())
    # The bench's own threshold (a --quiet_load it was given) labels the run as it is written;
    # read back (tools/checks/check_benchmarks.py), the file is judged by QUIET_LOAD alone.
    out.update(quiet_label(out, float(result.get("quiet_load", QUIET_LOAD))))
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
    """Per-round ratios a / b of two variants measured in the same rounds: median, min, max, n
    (``hvdscale.study.paired.recommend``'s paired summary, the one place the project pairs
    rounds)."""
    from hvdscale.study.paired.recommend import paired_summary

    s = paired_summary(a, b)
    return None if s is None else {k: s[k] for k in ("median", "min", "max", "n")}


def words_per_s(runs: list[dict[str, Any]]) -> list[float]:
    """The words/s of each run, in round order."""
    return [r["words_per_s"] for r in runs]
