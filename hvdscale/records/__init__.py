"""Records: what each kind holds (one module per kind, docs/records.md), the atomic store,
experiment identity, provenance, and Horovod's timeline and autotune logs.

``read(path)`` gives typed records; ``rows(records)`` flat rows for ``pandas.DataFrame``.
"""

from hvdscale.records.reader import read, rows

__all__ = ["read", "rows"]
