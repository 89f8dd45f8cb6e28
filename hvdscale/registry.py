"""The one list of framework names.

Config, sweep, gemm and profile validate against ``FRAMEWORKS``; ``load_framework`` imports
``hvdscale.frameworks.<name>`` for a name listed here. Adding a framework is a package under
``hvdscale/frameworks/`` (see the checklist in ``hvdscale.frameworks``), a models package, and
one entry here. This module imports nothing, so every layer may read it.
"""

from __future__ import annotations

LIBRARIES: dict[str, str] = {"torch": "torch", "tf": "tensorflow"}
"""Each framework's name and the Python library its package imports (a study tool checks that
the library is installed without importing it: importing one framework before another is
timed would change what is measured)."""

FRAMEWORKS: tuple[str, ...] = tuple(LIBRARIES)
"""Framework names, in the order reports list them: PyTorch, TensorFlow."""


def check_framework(name: str, key: str = "framework") -> str:
    """``name`` if it is a registered framework, else ValueError naming ``key`` and the choices."""
    if name not in FRAMEWORKS:
        raise ValueError(f"{key} must be one of {', '.join(FRAMEWORKS)} (got {name!r})")
    return name
