"""Own-run validation of ``predict --fit``: fit one round's points at n <= ``fit_max`` and
compare the prediction at every larger n with what that round measured (words/s and the
decomposition's terms). Used by bench/bench_predict_validate.py (two namespace hosts) and
evidence/many_cores_report.py (a many-core machine's rounds).
"""

from __future__ import annotations

import os
import statistics

from hvdscale.records.run import RunRecord
from hvdscale.study.predict.ownfit import fit_records
from hvdscale.study.report.decompose import baseline, per_step

TERMS = ("compute_s", "comm_s", "idle_s")
"""The step's terms the fit predicts and the decomposition measures (seconds per step)."""


def _measured_terms(recs: list[RunRecord], strategy: str, n: int) -> dict[str, float]:
    """The decomposition's measured terms (per step) at n, as the fit would have them."""
    ones = [r for r in recs if r.strategy_name == strategy and r.workers == 1]
    at = [r for r in recs if r.strategy_name == strategy and r.workers == n]
    g1 = baseline(ones).g1
    parts = [per_step(r, g1) for r in at]
    return {"compute_s": statistics.mean(p["compute"] for p in parts),
            "comm_s": statistics.mean(p["comm"] for p in parts),
            "idle_s": statistics.mean(p["idle"] for p in parts)}


def evaluate(recs: list[RunRecord], fit_max: int, ranks: list[int], nbytes: float) -> list[dict]:
    """Fit one round's n <= fit_max and compare with its larger n, per strategy."""
    small = [r for r in recs if r.workers <= fit_max]
    fit = fit_records(small, nbytes, 1, ranks)
    rows = []
    for s, f in fit["strategies"].items():
        for p in f["predictions"]:
            n = p["n"]
            at = [r for r in recs if r.strategy_name == s and r.workers == n]
            if n <= fit_max or not at:
                continue
            meas = statistics.median(r.words_per_s for r in at)
            got = _measured_terms(recs, s, n)
            wrong = max(TERMS, key=lambda k: abs(p[k] - got[k]))
            threads = at[0].intra_op_threads
            rows.append({"strategy": s, "n": n, "family": f["family"],
                         "measured_words_per_s": meas, "predicted_words_per_s": p["words_per_s"],
                         "ratio": p["words_per_s"] / meas,
                         "predicted_terms": {k: p[k] for k in TERMS}, "measured_terms": got,
                         "most_wrong_term": wrong, "rank_hosts": at[0].rank_hosts,
                         "oversubscribed": n * threads > (os.cpu_count() or 1)})
    return rows
