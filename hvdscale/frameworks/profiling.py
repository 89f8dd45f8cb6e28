"""What every framework's profiler reports (``hvdscale.frameworks.<name>.profile``, read by
``hvdscale profile``): the parts a step is split into, its phases, and the hook's shape."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

CATEGORIES = ("rnn", "softmax", "other")
"""The parts of a step: the RNN stacks, the softmax projection (projection and loss), the rest."""
PHASES = ("forward", "backward", "update")
"""The phases of a training step."""

ProfileSteps = Callable[[Any, Callable[[Any], float], list[Any], float], dict[str, Any]]
"""``profile_steps(adapter, step, batches, step_s)``: counts and times of one ``step`` per batch
under the framework's profiler, with ``step_s`` (the unprofiled median step) recorded beside."""
