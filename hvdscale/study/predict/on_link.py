"""``predict`` held to one link's measured points (issue 63's shaped link): every np=2 record of
a results directory predicted unfitted, from the rate alone and given its own compute, and a
faster link's fit carried to this one.

- ``unfitted``: the compute from the directory's records (1-rank runs, times the independent
  replicas' measured slowdown at n: ``compute.compute_from_records``), the network from the
  link's own commbench (``predict --comm``), each record predicted with its own config
  (``forecast.validate``: strategy, servers, fusion, overlap where a core is free for it);
- ``rate-only``: the same compute, the network from the set rate alone (``--bandwidth R
  --latency 0``);
- ``own-compute``: the unfitted network given the record's own measured compute: the
  communication model alone, the figure that says which term a miss is in;
- ``fit`` (``fit_carried``): ``predict --fit`` on the fastest link's sweep (np=1,2 of each
  strategy), carried to this link with ``--fit-link`` (``carry``: its communication scaled by
  the two links' commbench seconds per byte).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hvdscale.config import load_config
from hvdscale.records.run import RunRecord
from hvdscale.records.store import read_records
from hvdscale.study.predict.compute import (
    compute_from_records,
    critical_compute,
    record_words_per_step,
)
from hvdscale.study.predict.forecast import validate
from hvdscale.study.predict.inputs import gradient_bytes, network_from_args, network_from_comm
from hvdscale.study.predict.run import PredictSpec, run_predict


def series(rec: RunRecord) -> str:
    """A record's strategy as the rows name it: ``ps`` with two servers is ``ps2``."""
    s = rec.strategy_name
    if s == "ps" and rec.config.strategy.ps.num_servers > 1:
        return f"ps{rec.config.strategy.ps.num_servers}"
    return s


def _records(dirs: list[Path]) -> list[RunRecord]:
    """The run records under ``dirs`` (a missing one holds none)."""
    return [r for d in dirs if d.exists() for r in read_records(d) if isinstance(r, RunRecord)]


def predicted(config: str, sets: list[str], dirs: list[Path], comm: Path,
              rate_gbit: float) -> list[dict[str, Any]]:
    """Per np=2 record under ``dirs``: measured words/s and the unfitted, rate-only and
    own-compute predictions (the 1-rank records there give the compute).

    Raises:
        HvdscaleError: no commbench result at ``comm``, or no 1-rank record under ``dirs``.
    """
    cfg = load_config(config, sets)
    recs = _records(dirs)
    tensors = gradient_bytes(cfg)
    out = []
    for how, net in (("unfitted", network_from_comm(comm)),
                     ("rate-only", network_from_args("0us", f"{rate_gbit}Gbit", None))):
        cm = compute_from_records(recs, net, tensors)
        # in validate's own (stable) order, so its rows pair with the records one to one
        twos = sorted((r for r in recs if r.workers == 2),
                      key=lambda r: (r.strategy_name, r.ranks))
        for r, v in zip(twos, validate(twos, tensors, net, cm, 2 / 3), strict=True):
            out.append({"strategy": series(r), "measured_words_per_s": r.words_per_s,
                        "predicted_words_per_s": v["predicted_words_per_s"], "how": how,
                        # the compute term against the point's own (compute + straggler idle)
                        "predicted_compute_s": cm.compute_at(record_words_per_step(r),
                                                             r.workers),
                        "measured_compute_s": critical_compute(r)})
            if how == "unfitted":
                out.append({"strategy": series(r), "measured_words_per_s": r.words_per_s,
                            "predicted_words_per_s": v["predicted_own_compute_words_per_s"],
                            "how": "own-compute"})
    return out


def one_rank_rates(dirs: list[Path]) -> dict[str, float]:
    """Per strategy, the words/s of its 1-rank record under ``dirs`` (the speedup's base)."""
    return {r.strategy_name: r.words_per_s for r in _records(dirs) if r.workers == 1}


def fit_carried(config: str, sets: list[str], fast: Path, fast_comm: Path,
                here_comm: Path) -> dict[str, float]:
    """Per strategy, the np=2 words/s ``predict --fit FAST --fit-link FAST_COMM,HERE_COMM``
    gives: the fastest link's sweep fitted, carried to this link."""
    res = run_predict(config, sets, PredictSpec(ranks="2", fit=str(fast),
                                                fit_link=f"{fast_comm},{here_comm}"))
    return {s: next(p["words_per_s"] for p in f["predictions"] if p["n"] == 2)
            for s, f in res["fit"]["strategies"].items()}
