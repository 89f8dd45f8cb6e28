"""The one decision procedure for paired comparisons (issue 62): given the paired rounds so far,
A faster / slower by x % [95 % interval], no difference larger than delta, or undecided with how
many more rounds a decision would take. ``decide`` is the procedure; ``aa`` measures its error
rate on identical series. Method and assumptions: docs/running.md, "How verdicts are decided"."""

from hvdscale.study.verdict.decide import (
    ALPHA,
    DELTA,
    EQUIVALENT,
    FASTER,
    MIN_ROUNDS,
    SLOWER,
    UNDECIDED,
    Verdict,
    decide,
    look_alpha,
    still_open,
)

__all__ = ["ALPHA", "DELTA", "EQUIVALENT", "FASTER", "MIN_ROUNDS", "SLOWER", "UNDECIDED",
           "Verdict", "decide", "look_alpha",
           "still_open"]
