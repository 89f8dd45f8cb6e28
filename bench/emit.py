"""Shared tail of the benchmark scripts: print a result and, if asked, save it as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def emit(result: dict[str, Any], json_path: str = "") -> None:
    """Print ``result`` as indented JSON; also write it to ``json_path`` when one is given."""
    text = json.dumps(result, indent=1)
    print(text)
    if json_path:
        Path(json_path).write_text(text)
