"""Every record kind, by the name its files carry in ``kind``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hvdscale.records.batch import BatchRecord
from hvdscale.records.commbench import CommbenchRecord
from hvdscale.records.failed import FailedRecord
from hvdscale.records.fields import Record, RecordError
from hvdscale.records.gemm import GemmRecord
from hvdscale.records.launch import LaunchCost
from hvdscale.records.launch_plan import LaunchPlan
from hvdscale.records.migrate import migrate
from hvdscale.records.mutation import MutationRecord
from hvdscale.records.point_state import PointState
from hvdscale.records.profile import ProfileRecord
from hvdscale.records.run import RunRecord
from hvdscale.records.startup_bench import StartupBenchRecord

KINDS: dict[str, type[Record]] = {c.kind: c for c in (
    RunRecord, FailedRecord, LaunchCost, GemmRecord, BatchRecord, ProfileRecord,
    CommbenchRecord, MutationRecord, StartupBenchRecord, LaunchPlan, PointState)}


def typed(data: Mapping[str, Any], where: str = "record") -> Record:
    """The typed record of a file's JSON object (any version this hvdscale reads).

    Raises:
        RecordError: an unknown kind, a newer version, or a field that is missing or wrong.
    """
    rec = migrate(data, where)
    cls = KINDS.get(rec.get("kind"))  # type: ignore[arg-type]
    if cls is None:
        raise RecordError(f"{where}: field 'kind' is {rec.get('kind')!r}, not a record kind "
                          f"hvdscale knows ({', '.join(KINDS)})")
    return cls.from_dict(rec, where)
