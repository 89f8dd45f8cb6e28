"""commbench's communication model: the busbw definitions, the ``time = a + b * bytes`` fits
and the per-link alpha and beta behind them (``predict`` costs a step with the same model).

Definitions (nccl-tests' for allreduce): a repeat's time is the slowest rank's; the size's time
is the median over repeats after warm-up; algbw = bytes / time; busbw = algbw * factor, with
factor = 2(n-1)/n for allreduce (the bytes each rank sends, over the message size). For the
parameter server the size is the model (each worker pushes all of it and pulls all of it back)
and factor = 2 * (the most bytes one rank sends or receives in one phase) / size: both are the
bandwidth one rank's link sustains, so the transports compare on one scale. Sizes use binary
units (1 KB = 1024 B).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hvdscale.study.commbench.sizes import human

BREAK_RESIDUAL = 0.25
"""A size whose time is off a transport's single line by more than this (relative) is one the
line does not describe."""
LATENCY_MAX_BYTES = 64 << 10
BANDWIDTH_MIN_BYTES = 1 << 20


def allreduce_factor(n: int) -> float:
    """nccl-tests' busbw / algbw for allreduce: 2(n-1)/n."""
    return 2.0 * (n - 1) / n


def ps_phase(workers: int, servers: int, placement: str) -> tuple[int, float]:
    """The busiest rank in one phase (push, or the mirror-image pull) of the parameter server.

    Ranks are laid out as ``strategies.param_server``: servers are ranks 0..k-1; colocated, every
    rank computes; dedicated, ranks k.. compute. Each worker sends 1/k of the model to each
    server; a message a rank sends itself crosses no link and is not counted.

    Returns:
        (the most messages one rank sends or receives, the most bytes one rank sends or
        receives as a fraction of the model).
    """
    k = servers
    srv = list(range(k))
    wrk = list(range(workers)) if placement == "colocated" else list(range(k, k + workers))
    n = max([*srv, *wrk]) + 1
    sent, recv = np.zeros(n), np.zeros(n)
    msent, mrecv = np.zeros(n, int), np.zeros(n, int)
    for w in wrk:
        for s in srv:
            if w != s:
                sent[w] += 1.0 / k
                recv[s] += 1.0 / k
                msent[w] += 1
                mrecv[s] += 1
    return int(max(msent.max(), mrecv.max())), float(max(sent.max(), recv.max()))


def ps_factor(workers: int, servers: int, placement: str) -> float:
    """busbw / algbw of the parameter server: 2 phases x the busiest rank's share."""
    return 2.0 * ps_phase(workers, servers, placement)[1]


def _wls(x: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """t = a + b x, least squares on relative residuals (weights 1/t): small and large messages
    count alike. Returns (a, b), their standard errors, and the relative residuals."""
    w = 1.0 / t
    X = np.stack([np.ones_like(x), x], axis=1)
    coef, *_ = np.linalg.lstsq(X * w[:, None], t * w, rcond=None)
    rel = (t - X @ coef) / t
    dof = max(1, len(t) - 2)
    cov = (rel @ rel / dof) * np.linalg.pinv((X * w[:, None]).T @ (X * w[:, None]))
    return coef, np.sqrt(np.clip(np.diag(cov), 0, None)), rel


def fit_alpha_beta(sizes: Sequence[int], times: Sequence[float]) -> dict[str, Any]:
    """Fit time = a + b * bytes, its error, and where one line stops describing the data.

    Returns:
        ``a_s``, ``b_s_per_byte`` with standard errors, ``rms_rel_residual``, per-size relative
        ``residuals``, ``off_line`` (sizes more than ``BREAK_RESIDUAL`` off the line) and
        ``break`` (the split into two lines that best lowers the error, when it at least halves
        it and some size is off the single line; None otherwise).
    """
    x, t = np.asarray(sizes, float), np.asarray(times, float)
    if len(x) < 2:
        return {"a_s": float(t[0]) if len(t) else None, "b_s_per_byte": None, "a_se_s": None,
                "b_se_s_per_byte": None, "rms_rel_residual": None, "residuals": [],
                "off_line": [], "break": None, "points": len(x)}
    coef, se, rel = _wls(x, t)
    out: dict[str, Any] = {
        "a_s": float(coef[0]), "b_s_per_byte": float(coef[1]), "a_se_s": float(se[0]),
        "b_se_s_per_byte": float(se[1]),
        "bandwidth_GBps": 1e-9 / float(coef[1]) if coef[1] > 0 else None,
        "rms_rel_residual": float(np.sqrt(np.mean(rel ** 2))),
        "residuals": [float(r) for r in rel], "points": len(x),
        "off_line": [int(s) for s, r in zip(x, rel, strict=True) if abs(r) > BREAK_RESIDUAL],
        "break": None}
    sse = float(rel @ rel)
    best = None
    for k in range(3, len(x) - 2):  # at least 3 sizes on each side
        (c1, _, r1), (c2, _, r2) = _wls(x[:k], t[:k]), _wls(x[k:], t[k:])
        s2 = float(r1 @ r1 + r2 @ r2)
        if best is None or s2 < best[0]:
            best = (s2, k, c1, c2)
    if best is not None and out["off_line"] and best[0] < 0.5 * sse:
        s2, k, c1, c2 = best
        out["break"] = {"below_bytes": int(x[k - 1]), "above_bytes": int(x[k]),
                        "sse_one_line": sse, "sse_two_lines": s2,
                        "below": {"a_s": float(c1[0]), "b_s_per_byte": float(c1[1])},
                        "above": {"a_s": float(c2[0]), "b_s_per_byte": float(c2[1])}}
    return out


def link_parameters(transport: str, fit: dict[str, Any], n: int, ps_servers: int,
                    ps_placement: str, sizes: Sequence[int] = (),
                    times: Sequence[float] = ()) -> dict[str, Any]:
    """Per-link latency and seconds per byte from a transport's fit, through its textbook cost:
    a ping-pong 2 alpha + 2 bytes beta; ring allreduce 2(n-1) alpha + 2(n-1)/n bytes beta;
    parameter server 2 (m alpha + f bytes beta) with m messages and a share f of the model
    through its busiest rank per phase.

    With the measured ``sizes`` and ``times``, and at least two sizes in each regime, alpha comes
    from a line through the sizes up to 64 KB (the latency regime) and beta from a line through
    the sizes from 1 MB (the bandwidth regime): one line over the whole range bends to fit both
    and misstates each where a protocol or buffer switch lies between them.
    """
    if fit.get("b_s_per_byte") is None:
        return {"alpha_s": None, "beta_s_per_byte": None}
    if transport == "p2p":
        hops, factor = 2, 2.0  # a ping-pong: two messages of the size, one after the other
    elif transport == "ps":
        msgs, frac = ps_phase(n if ps_placement == "colocated" else n - ps_servers,
                              ps_servers, ps_placement)
        hops, factor = 2 * msgs, 2 * frac
    else:
        hops, factor = 2 * (n - 1), allreduce_factor(n)
    if hops == 0 or factor == 0:
        return {"alpha_s": None, "beta_s_per_byte": None}
    a, b, a_se, b_se, how = fit["a_s"], fit["b_s_per_byte"], fit["a_se_s"], \
        fit["b_se_s_per_byte"], "one line over all sizes"
    small = [(x, t) for x, t in zip(sizes, times, strict=True) if x <= LATENCY_MAX_BYTES]
    large = [(x, t) for x, t in zip(sizes, times, strict=True) if x >= BANDWIDTH_MIN_BYTES]
    if len(small) >= 2 and len(large) >= 2:
        fs, fl = fit_alpha_beta(*zip(*small, strict=True)), fit_alpha_beta(*zip(*large,
                                                                                 strict=True))
        if fl["b_s_per_byte"] > 0:
            a, a_se, b, b_se = fs["a_s"], fs["a_se_s"], fl["b_s_per_byte"], fl["b_se_s_per_byte"]
            how = (f"alpha from sizes <= {human(LATENCY_MAX_BYTES)}, beta from sizes >= "
                   f"{human(BANDWIDTH_MIN_BYTES)}")
    alpha = max(0.0, a) / hops
    beta = b / factor
    return {"alpha_s": alpha, "beta_s_per_byte": beta, "op_latency_s": max(0.0, a),
            "bandwidth_GBps": 1e-9 / beta if beta > 0 else None,
            "alpha_se_s": a_se / hops, "beta_se_s_per_byte": b_se / factor, "from": how}


def refit(data: dict[str, Any]) -> dict[str, Any]:
    """Fit and link parameters of every transport again from its stored points (what
    ``load_commbench`` trusts, rather than derived figures a file may carry)."""
    n, ps = data["ranks"], data.get("ps") or {"servers": 1, "placement": "colocated"}
    for name, tr in data["transports"].items():
        x = [int(p["bytes"]) for p in tr["points"]]
        t = [float(p["time_s"]) for p in tr["points"]]
        tr["fit"] = fit_alpha_beta(x, t)
        tr["link"] = link_parameters(name, tr["fit"], n, int(ps["servers"]), ps["placement"],
                                     x, t)
    return data


def summarize_points(raw: list[dict], factor: float) -> list[dict]:
    """Median time, algbw and busbw per size from the per-repeat (slowest-rank) times."""
    out = []
    for p in raw:
        t = float(np.median(p["times_s"]))
        alg = p["bytes"] / t / 1e9
        out.append({"bytes": p["bytes"], "time_s": t, "repeats": len(p["times_s"]),
                    "times_s": p["times_s"], "algbw_GBps": alg, "busbw_GBps": alg * factor})
    return out
