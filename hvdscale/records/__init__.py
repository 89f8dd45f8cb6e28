"""Records: what each kind holds (one module per kind, docs/records.md), the atomic store,
experiment identity, provenance, and Horovod's timeline and autotune logs.

``read(path)`` gives typed records; ``rows(records)`` flat rows for ``pandas.DataFrame``;
``steps(records)`` the run records' measured steps, one row per rank and step.
"""

from hvdscale.records.reader import read, rows, steps

__all__ = ["read", "rows", "steps"]
