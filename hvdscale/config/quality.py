"""``measure.until``: train until the model reaches a quality target, with a time cap."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hvdscale.config.fields import check as _check


@dataclass(frozen=True)
class UntilConfig:
    """A quality target: with ``metric`` set, the run trains until the evaluation reaches
    ``target`` or the training time reaches ``max_time_s`` (status ok, ``reached: false``)."""

    metric: Literal["none", "loss", "perplexity", "floor_fraction"] = "none"
    """``none``: the fixed-step measurement. ``loss``: per-token eval loss <= target (nats);
    ``perplexity``: eval perplexity <= target; ``floor_fraction``: eval perplexity <= (1 +
    target) x the source's known perplexity floor (synthetic markov, mapped or uniform lm)."""
    target: float = 0.0
    """The value ``metric`` must reach."""
    max_time_s: float = 300.0
    """Training-time cap in seconds (evaluation excluded), checked at every evaluation."""
    max_steps: int = 1_000_000
    """Step cap (measured steps; the run stops at whichever cap comes first)."""

    def __post_init__(self) -> None:
        _check(self.metric in ("none", "loss", "perplexity", "floor_fraction"),
               "measure.until.metric", "must be none, loss, perplexity or floor_fraction",
               self.metric)
        if self.metric == "perplexity":
            _check(self.target >= 1, "measure.until.target", "must be >= 1 for perplexity",
                   self.target)
        elif self.metric != "none":
            _check(self.target >= 0, "measure.until.target", "must be >= 0", self.target)
        _check(self.max_time_s > 0, "measure.until.max_time_s", "must be > 0", self.max_time_s)
        _check(self.max_steps >= 1, "measure.until.max_steps", "must be >= 1", self.max_steps)

    @property
    def active(self) -> bool:
        """Whether the run trains to a target (else the fixed-step measurement)."""
        return self.metric != "none"
