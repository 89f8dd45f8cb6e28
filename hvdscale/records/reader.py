"""Records for users: ``hvdscale.records.read(path)`` gives typed records, ``rows`` flat rows.

    >>> import pandas as pd, hvdscale.records as hr
    >>> recs = hr.read("results/")              # every results.jsonl under it
    >>> df = pd.DataFrame(hr.rows(recs))        # one row per record
    >>> df[df.kind == "run"][["config.strategy.name", "ranks", "words_per_s"]]

``read`` takes a ``results.jsonl``, a folder (each results.jsonl and sweep_timing.jsonl in it,
recursively), a sweep's ``sweep_timing.jsonl``, or a study tool's JSON file (gemm, batch,
profile, commbench, the mutation and start-up benches' files). Each record is checked against
its kind (docs/records.md); a bad one raises ``HvdscaleError`` naming the file, line and field.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hvdscale.errors import HvdscaleError
from hvdscale.records.fields import Record, loads
from hvdscale.records.kinds import typed
from hvdscale.records.launch import TIMING_FILE
from hvdscale.records.store import load_records


def read(path: str | Path) -> list[Record]:
    """Every record at ``path``, typed (see the module's docstring for what it takes).

    Raises:
        HvdscaleError: a missing or unreadable path, or a record that is not what its kind
            declares (the message names the file, line and field).
    """
    p = Path(path)
    if not p.exists():
        raise HvdscaleError(f"no records at {p}")
    if p.is_dir():
        found = [rec for _, rec in load_records(p)]  # [] where the folder holds no results
        for f in sorted(p.rglob(TIMING_FILE)):
            found += _timing(f)
        return found
    if p.name == TIMING_FILE:
        return _timing(p)
    if p.suffix == ".jsonl":
        return [rec for _, rec in load_records(p)]
    return _json_file(p)


def _timing(path: Path) -> list[Record]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [typed({**_object(line, f"{path}:{n}"), "kind": "launch"}, f"{path}:{n}")
            for n, line in enumerate(lines, 1) if line.strip()]


def _object(text: str, where: str) -> dict[str, Any]:
    try:
        got = loads(text)
    except ValueError:
        raise HvdscaleError(f"{where} is not JSON") from None
    if not isinstance(got, dict):
        raise HvdscaleError(f"{where} is not a JSON object")
    return got


def _json_file(path: Path) -> list[Record]:
    """A study tool's or a bench's JSON file: one record, or a list of them."""
    data = _object(path.read_text(encoding="utf-8"), str(path))
    if "modules" in data and "tool" in data:  # the mutation harness: one record per module
        return [typed({**m, "kind": "mutation"}, f"{path}: module {m.get('name')!r}")
                for m in data["modules"]]
    if data.get("bench") == "startup":
        return [typed({**data, "kind": "startup_bench"}, str(path))]
    if isinstance(data.get("records"), list):
        return [typed(r, f"{path}: record {i}") for i, r in enumerate(data["records"])]
    if "kind" in data:
        return [typed(data, str(path))]
    raise HvdscaleError(f"{path}: not a file of records (no 'kind'); hvdscale.records.read "
                        "takes results.jsonl, sweep_timing.jsonl or a study tool's JSON")


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = value


def rows(records: Iterable[Record]) -> list[dict[str, Any]]:
    """One flat row per record: its kind, then every field, nested sections flattened with
    dotted names (``step_time.median``, ``config.strategy.name``); lists stay lists, and a run
    record's per-step ``raw`` lists stay out (``steps`` gives them as a table of their own).
    ``pandas.DataFrame(rows(recs))`` takes them as they are."""
    out = []
    for rec in records:
        row: dict[str, Any] = {}
        data = rec.to_dict()
        data.pop("raw", None)
        _flatten("", data, row)
        out.append(row)
    return out


def steps(records: Iterable[Record]) -> list[dict[str, Any]]:
    """One row per run record, computing rank and measured step, from each record's ``raw``
    (records written before it have none and give no rows): ``record`` (the record's place in
    ``records``), ``name``, ``strategy``, ``ranks``, ``rank``, ``step`` (from 0), ``step_s``,
    ``compute_s`` and ``words``. ``pandas.DataFrame(steps(recs))`` is the long table."""
    out = []
    for i, rec in enumerate(records):
        raw = getattr(rec, "raw", None)
        if raw is None:
            continue
        head = {"record": i, "name": rec.name, "strategy": rec.strategy_name,
                "ranks": rec.ranks}
        for rank, times, compute, words in zip(raw.ranks, raw.step_s, raw.compute_s,
                                               raw.words, strict=True):
            out += [{**head, "rank": rank, "step": n, "step_s": t, "compute_s": c, "words": w}
                    for n, (t, c, w) in enumerate(zip(times, compute, words, strict=True))]
    return out
