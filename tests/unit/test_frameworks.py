"""Every registered framework package provides every hook ``hvdscale.frameworks.base.Framework``
declares, and ``load_framework`` refuses a name that is not registered.

The hooks are read from the protocol itself, so a hook added there is checked here without
editing this file. Each framework is imported in its own process: a framework package imports
its framework, and importing torch and tensorflow into one process is slow and not what a run
ever does.
"""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys

import pytest

from hvdscale.frameworks import load_framework
from hvdscale.frameworks.base import Framework
from hvdscale.registry import FRAMEWORKS, LIBRARIES

_PROBE = """
import json, sys
from hvdscale.frameworks import load_framework
fw = load_framework(sys.argv[1])
names = json.loads(sys.argv[2])
print(json.dumps({n: {"present": hasattr(fw, n), "callable": callable(getattr(fw, n, None))}
                  for n in names}))
import importlib
def has(module, attr):
    try:
        return callable(getattr(importlib.import_module(module), attr, None))
    except ImportError:
        return False
base = "hvdscale.frameworks." + sys.argv[1]
print(json.dumps({"FRAMEWORK": getattr(fw, "FRAMEWORK", None),
                  "horovod_module": getattr(getattr(fw, "HOROVOD", None), "module", None),
                  "allreduce_op": callable(getattr(getattr(fw, "HOROVOD", None),
                                                   "allreduce_op", None)),
                  "gemm": has(base + ".gemm", "backend"),
                  "profile": has(base + ".profile", "profile_steps"),
                  "library_loaded": sys.argv[3] in sys.modules}))
"""


def hooks() -> dict[str, bool]:
    """The protocol's members: name -> whether it is a method (so must be callable)."""
    members = {name: False for name in Framework.__annotations__}
    for name, value in vars(Framework).items():
        if not name.startswith("_") and inspect.isfunction(value):
            members[name] = True
    return members


def test_protocol_declares_the_known_hooks() -> None:
    # Guards the introspection above: a change that hid the members would pass every check.
    assert {"FRAMEWORK", "HOROVOD", "HorovodStrategy", "set_threads", "gpu_count", "use_device",
            "gpu_provenance", "make_adapter"} <= set(hooks())


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_framework_provides_every_hook(name: str) -> None:
    declared = hooks()
    r = subprocess.run([sys.executable, "-c", _PROBE, name, json.dumps(sorted(declared)),
                        LIBRARIES[name]],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    found_line, facts_line = r.stdout.strip().splitlines()[-2:]
    found, facts = json.loads(found_line), json.loads(facts_line)
    missing = [n for n in declared if not found[n]["present"]]
    assert not missing, f"hvdscale.frameworks.{name} lacks hooks {missing}"
    not_callable = [n for n, method in declared.items() if method and not found[n]["callable"]]
    assert not not_callable, f"hvdscale.frameworks.{name}: {not_callable} are not callable"
    assert found["HorovodStrategy"]["callable"]
    assert facts["FRAMEWORK"] == name
    assert str(facts["horovod_module"]).startswith("horovod.")
    # The study tools' hooks live in submodules (they import more than a run needs).
    assert facts["allreduce_op"], f"hvdscale.frameworks.{name}.HOROVOD lacks allreduce_op"
    assert facts["gemm"], f"hvdscale.frameworks.{name}.gemm lacks backend()"
    assert facts["profile"], f"hvdscale.frameworks.{name}.profile lacks profile_steps()"
    # The registry names the library the package imports (checked without importing it).
    assert facts["library_loaded"], f"hvdscale.frameworks.{name} never imported " \
        f"{LIBRARIES[name]} (hvdscale.registry.LIBRARIES)"


def test_load_framework_refuses_an_unknown_name() -> None:
    choices = ", ".join(FRAMEWORKS)
    with pytest.raises(ValueError, match=re.escape(f"framework must be one of {choices} "
                                                   "(got 'mxnet')")):
        load_framework("mxnet")
