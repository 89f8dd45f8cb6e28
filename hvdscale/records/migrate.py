"""Record versions: the one the writers stamp, and the way an older file's record reads today.

Version 1 (hvdscale up to issue 53) left ``kind`` out of a training run's record and of a
failed point's (both were "run", told apart by ``status``); version 2 writes every record's
kind, and a failed point's kind is ``failed``. A record without ``schema`` predates the stamp
and has version 1's layout. A record from a newer hvdscale is refused: its fields may mean
something this one does not know.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hvdscale.errors import RecordError

SCHEMA_VERSION = 2


def _v1_to_v2(rec: dict[str, Any]) -> dict[str, Any]:
    if "kind" not in rec or (rec.get("kind") == "run" and rec.get("status") == "failed"):
        rec["kind"] = "failed" if rec.get("status") == "failed" else "run"
    return rec


STEPS = {1: _v1_to_v2}
"""Version n's record -> version n+1's."""


def migrate(rec: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``rec`` (a file's JSON object) in the current version's layout.

    Raises:
        RecordError: its ``schema`` is not a version this hvdscale reads.
    """
    version = rec.get("schema", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise RecordError(f"{where}: field 'schema' should be a version number, got "
                          f"{version!r}")
    if version > SCHEMA_VERSION:
        raise RecordError(f"{where}: written by a newer hvdscale (schema {version}; this one "
                          f"reads up to {SCHEMA_VERSION}); upgrade hvdscale to read it")
    out = dict(rec)
    for v in range(version, SCHEMA_VERSION):
        out = STEPS[v](out)
    out["schema"] = SCHEMA_VERSION
    return out
