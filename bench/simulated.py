"""The machines simulated on this one (tools/testbed/: two namespace hosts with sshd, a machine
whose name server never answers), for the benches that measure on them.

They are the tests' scaffolding, not part of the installed package, so a bench loads them from
this checkout by their path: a bench run as ``python bench/X.py`` has bench/ on its import
path, not the checkout's root (and the benches never edit their import path).
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TESTBED = Path(__file__).resolve().parents[1] / "tools" / "testbed"


@functools.cache
def testbed(name: str) -> ModuleType:
    """``tools/testbed/<name>.py`` (``netns`` or ``nodns``) as a module, loaded once."""
    spec = importlib.util.spec_from_file_location(f"testbed_{name}", TESTBED / f"{name}.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"no simulated machine {name!r} in {TESTBED}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def tools_package() -> ModuleType:
    """The checkout's ``tools`` folder as the package ``tools`` (a namespace package: the
    testbed's modules import one another as ``tools.testbed.X``), registered by its folder, so
    ``from tools.testbed import link`` works after this call without editing the import path."""
    spec = importlib.machinery.ModuleSpec("tools", None, is_package=True)
    spec.submodule_search_locations = [str(TESTBED.parent)]
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("tools", module)
    return sys.modules["tools"]
