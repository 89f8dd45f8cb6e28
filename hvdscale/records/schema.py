"""The schema version every writer stamps, re-exported from ``hvdscale.records.migrate``.

Readers use the typed records' attributes and properties (``hvdscale.records.run.RunRecord``,
``hvdscale.records.failed.FailedRecord``...); this module is left only for writers that still
import ``SCHEMA_VERSION`` from here (import it from ``hvdscale.records.migrate`` instead).
"""

from __future__ import annotations

from hvdscale.records.migrate import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION"]
