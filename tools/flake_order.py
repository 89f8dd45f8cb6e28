"""pytest plugin of tools/flakes.py --shuffle: modules in a random order, and the tests of each
module in a random order, from the seed in $HVDSCALE_FLAKE_SEED (the same seed, the same order).

A module's tests stay together so its module-scoped fixtures are built once, as in the suite.
"""

from __future__ import annotations

import os
import random

import pytest


def shuffled(items: list, seed: int) -> list:
    """``items`` (pytest items) grouped by module, modules and tests each shuffled by ``seed``."""
    rng = random.Random(seed)
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    order = list(modules)
    rng.shuffle(order)
    out: list = []
    for name in order:
        tests = modules[name]
        rng.shuffle(tests)
        out.extend(tests)
    return out


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """Reorder the collected tests in place."""
    seed = os.environ.get("HVDSCALE_FLAKE_SEED")
    if seed is not None:
        items[:] = shuffled(items, int(seed))
