"""The shared end of the benches that build hosts on this machine (network namespaces, tc):
refuse without root, run, write the raw result atomically, print its rendering."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def run_as_root(name: str, run: Callable[[], dict[str, Any]],
                render: Callable[[dict[str, Any]], str], out: str) -> int:
    """``run()`` and print ``render`` of its result, written to ``out`` first (when given) by
    a rename, so a killed bench never leaves half a raw file. Exit status 2 without root, 1
    when the run raises AssertionError or ValueError (a failed command, a bad input: its own
    one-line message), else 0."""
    if os.geteuid() != 0:
        print(f"{name}: needs root (network namespaces, tc)", file=sys.stderr)
        return 2
    try:
        res = run()
    except (AssertionError, ValueError) as e:
        print(f"{name}: {e}", file=sys.stderr)
        return 1
    if out:
        tmp = Path(out + ".tmp")
        tmp.write_text(json.dumps(res, indent=1) + "\n")
        tmp.replace(out)
    print(render(res), end="")
    return 0
