"""``predict --fit RESULTS --fit-link FROM,TO``: a fit made on one network carried to another.

The fit's communication term is in seconds per byte of the step's gradients (and per hop), so
on another link it scales with the links' seconds per byte: each strategy's total
communication is multiplied by ``TO``'s beta over ``FROM``'s (both commbench results: the
parameter server's transport for the ``ps`` family, the allreduce's for every other), the part
backward hid at the fitted link stays hidden, and compute, straggler idle and g1 stay as
fitted. The latency part of a family is scaled the same way: right where bandwidth dominates
(large gradients, a slow link), an approximation where latency does.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from hvdscale.errors import HvdscaleError
from hvdscale.study.predict.inputs import Network, network_from_comm


def parse_fit_link(text: str) -> tuple[Network, Network]:
    """``FROM,TO`` (two commbench result directories) as their networks.

    Raises:
        HvdscaleError: not two paths, or either is not a commbench result.
    """
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise HvdscaleError(f"--fit-link needs FROM,TO: two commbench result directories, the "
                            f"fit's link and the link to carry it to (got {text!r})")
    return network_from_comm(Path(parts[0])), network_from_comm(Path(parts[1]))


def _carried(p: dict[str, Any], ratio: float) -> dict[str, Any]:
    """One prediction with its total communication times ``ratio``."""
    words = p["words_per_s"] * p["step_s"]  # words a step, all ranks
    # what backward hid at the fitted link stays hidden (no more: its capacity is not known)
    hidden = max(0.0, p["comm_total_s"] - p["comm_s"])
    total = p["comm_total_s"] * ratio
    comm = max(0.0, total - hidden)
    step = p["compute_s"] + comm + p["idle_s"] + p["g1_s"]
    lo = p["interval"][0]
    hw = words / lo - p["step_s"] if lo else math.inf  # the step's half-width, as fitted
    return {**p, "comm_s": comm, "comm_total_s": total, "step_s": step,
            "words_per_s": words / step,
            "interval": [words / (step + hw) if math.isfinite(hw) else None,
                         words / (step - hw) if math.isfinite(hw) and step > hw else None]}


def carry_fit(fit: dict[str, Any], src: Network, dst: Network) -> dict[str, Any]:
    """``fit`` (``ownfit.fit_records``'s) with every strategy's predictions carried from the
    link ``src`` to ``dst``; ``fit["carried"]`` says by what factor."""
    ratios = {"ps": dst.ps_beta / src.ps_beta, "allreduce": dst.ring_beta / src.ring_beta}
    out = {**fit, "strategies": {},
           "carried": {"from": src.source, "to": dst.source, "comm_factor": ratios}}
    for s, r in fit["strategies"].items():
        ratio = ratios["ps"] if r["family"] == "ps" else ratios["allreduce"]
        out["strategies"][s] = {**r, "carried_factor": ratio,
                                "predictions": [_carried(p, ratio) for p in r["predictions"]]}
    return out
