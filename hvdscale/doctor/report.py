"""The doctor's report as aligned text (people) or JSON (machines)."""

from __future__ import annotations

import json
from typing import Any

from hvdscale.doctor.lines import FAIL, OK, WARN, Line


def summary(lines: list[Line]) -> dict[str, int]:
    """How many lines have each status."""
    return {s: sum(ln.status == s for ln in lines) for s in (OK, WARN, FAIL)}


def text(lines: list[Line], title: str) -> str:
    """One aligned line per check (status, check, value) and its fix indented below it."""
    width = max((len(ln.check) for ln in lines), default=0)
    out = [title]
    for ln in lines:
        out.append(f"{ln.status:<4}  {ln.check:<{width}}  {ln.value}")
        if ln.fix and ln.status != OK:
            out.append(f"{'':<4}  {'':<{width}}  fix: {ln.fix}")
    n = summary(lines)
    out.append(f"{n[OK]} ok, {n[WARN]} warn, {n[FAIL]} fail")
    return "\n".join(out) + "\n"


def as_json(lines: list[Line], extra: dict[str, Any]) -> str:
    """The lines, their summary and ``extra`` (plan, facts, bench) as one JSON document."""
    doc = {"lines": [ln.to_dict() for ln in lines], "summary": summary(lines), **extra}
    return json.dumps(doc, indent=1, default=str) + "\n"
