"""predict's forecast: every strategy at every rank count, and every record predicted again.

Step time = compute(per-rank batch) + the strategy's exposed communication + the 1-worker
non-compute time per step (optimizer, data, loop), taken from the records. Weak scaling keeps
the per-rank batch; strong scaling divides the global batch (compute = c0 + c1 x words).

Sparse embedding gradients count only where they run: a config's Horovod ``gathered`` setting
changes the ring columns, its parameter server's ``sparse_embeddings`` the PS columns, and each
record is predicted with its own config's setting (``sparse_setup``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from hvdscale.config import RunConfig
from hvdscale.records.run import RunRecord
from hvdscale.study.predict.compute import (
    ComputeModel,
    critical_compute,
    has_comm_core,
    record_strategy,
    record_words_per_step,
)
from hvdscale.study.predict.cost import HOROVOD_DEFAULT_FUSION_MB, CommSetup, comm_time
from hvdscale.study.predict.inputs import Network, gradient_bytes
from hvdscale.study.predict.sparse_bytes import gathered_tensor_bytes, ps_bytes

STRATEGIES = ("ring", "ring-overlap", "ps-dedicated", "ps-sharded")
LABELS = {"ring": "ring allreduce, no overlap", "ring-overlap": "ring allreduce, overlapped",
          "ps-dedicated": "PS, dedicated servers", "ps-sharded": "PS, colocated sharded"}


@dataclass(frozen=True)
class Inputs:
    """What every predicted point is made from: gradient bytes per tensor (parameter order),
    the network, the compute model and the share of compute spent in backward."""

    tensors: list[int]
    net: Network
    cm: ComputeModel
    backward_fraction: float


def sparse_setup(cfg: RunConfig, strategy: str, n: int, setup: CommSetup,
                 scaling: str | None = None) -> CommSetup:
    """``setup`` with ``cfg``'s sparse embedding traffic at ``n`` workers under ``scaling``
    (default ``cfg.data.scaling``: strong scaling splits the global batch, so each rank
    touches fewer rows), for ``strategy`` only if that is the strategy family ``cfg``'s
    setting belongs to (else unchanged)."""
    if scaling is not None and scaling != cfg.data.scaling:
        cfg = replace(cfg, data=replace(cfg.data, scaling=scaling))
    if strategy.startswith("ring") or strategy == "horovod":
        gathered = gathered_tensor_bytes(cfg, n)
        return replace(setup, gathered=gathered) if gathered else setup
    if strategy.startswith("ps"):
        pp = ps_bytes(cfg, n)
        return replace(setup, push_bytes=pp[0], pull_bytes=pp[1]) if pp else setup
    return setup


def _dropped(n: int, scaling: str, batch_size: int) -> bool:
    """Strong scaling leaves one of ``n`` ranks no sentence (``predict_point`` gives None)."""
    return scaling == "strong" and n > batch_size


def predict_point(strategy: str, n: int, scaling: str, inputs: Inputs, setup: CommSetup,
                  batch_size: int) -> dict[str, Any] | None:
    """Predicted step of ``strategy`` with ``n`` workers (None: strong scaling leaves a rank
    no sentence)."""
    if _dropped(n, scaling, batch_size):
        return None
    cm = inputs.cm
    words = cm.words_per_step / n if scaling == "strong" else cm.words_per_step
    compute = cm.compute(words)
    comm = comm_time(strategy, n, inputs.tensors, inputs.net, compute, inputs.backward_fraction,
                     setup)
    rest_key = "horovod" if strategy.startswith("ring") else "ps"
    step = compute + comm + cm.rest(rest_key)
    return {"ranks": n, "compute_s": compute, "comm_exposed_s": comm,
            "rest_s": cm.rest(rest_key), "step_s": step, "words_per_s": n * words / step}


def predict(cfg: RunConfig, ranks: list[int], net: Network, cm: ComputeModel,
            scalings: list[str], backward_fraction: float = 2 / 3,
            servers: int | None = None) -> dict[str, Any]:
    """Every strategy at every rank count and scaling mode; efficiency over its own 1 rank."""
    tensors = gradient_bytes(cfg)
    k = servers or cfg.strategy.ps.num_servers
    threshold = (cfg.strategy.horovod.fusion_threshold_mb or HOROVOD_DEFAULT_FUSION_MB) * 2**20
    inputs, setup = Inputs(tensors, net, cm, backward_fraction), CommSetup(threshold, k)
    out: dict[str, Any] = {"model_bytes": int(sum(tensors)), "tensors": len(tensors),
                           "largest_tensor_bytes": int(max(tensors)),
                           "fusion_threshold_bytes": threshold, "servers": k,
                           "backward_fraction": backward_fraction, "scaling": {}}
    for scaling in scalings:
        table: dict[str, list[dict | None]] = {}
        for s in STRATEGIES:
            rows = []
            for n in [1, *ranks]:
                # the data plan of a dropped point would fail: no sparse bytes for it
                own = setup if _dropped(n, scaling, cfg.data.batch_size) else \
                    sparse_setup(cfg, s, n, setup, scaling)
                rows.append(predict_point(s, n, scaling, inputs, own, cfg.data.batch_size))
            base = rows.pop(0)
            for n, p in zip(ranks, rows, strict=True):
                if p is not None and base is not None:
                    p["efficiency_pct"] = 100.0 * p["words_per_s"] / (n * base["words_per_s"])
            table[s] = rows
        out["scaling"][scaling] = table
    return out


def validate(records: list[RunRecord], tensors: list[int], net: Network, cm: ComputeModel,
             backward_fraction: float) -> list[dict[str, Any]]:
    """Predicted vs measured words/s for every record: with the compute time from the 1-worker
    fit (a true prediction; times the independent replicas' slowdown at that count where
    measured) and with the record's own measured compute of the slowest rank per step (the
    communication model alone). Each record's overlap counts only where its hosts had a core
    for the communication thread (``has_comm_core``)."""
    from hvdscale.core.threads import cores_on_host

    rows = []
    for r in sorted(records, key=lambda r: (record_strategy(r), r.ranks)):
        s, w = record_strategy(r), r.workers
        words = record_words_per_step(r)
        own = critical_compute(r)
        setup = CommSetup.of_record(r.config)
        setup = sparse_setup(r.config, s, w, setup)
        setup = replace(setup, overlap=setup.overlap and has_comm_core(r))
        preds = []
        for compute in (cm.compute_at(words, w), own):
            comm = comm_time(s, w, tensors, net, compute, backward_fraction, setup)
            step = compute + comm + cm.rest(s)
            preds.append(w * words / step)
        meas = r.words_per_s
        extra = {}
        if s == "horovod":  # the same without overlap: CPU-bound comm cannot hide behind compute
            step = own + comm_time("ring", w, tensors, net, own, backward_fraction,
                                   setup) + cm.rest(s)
            extra = {"predicted_own_compute_no_overlap_words_per_s": w * words / step,
                     "error_own_compute_no_overlap_pct": 100.0 * (w * words / step - meas) / meas}
        per_host = r.ranks / max(1, len(r.hosts or [1]))
        threads = r.intra_op_threads
        rows.append({"strategy": s, "ranks": r.ranks, "workers": w, "overlap": setup.overlap,
                     "measured_words_per_s": meas, "predicted_words_per_s": preds[0],
                     "error_pct": 100.0 * (preds[0] - meas) / meas,
                     "predicted_own_compute_words_per_s": preds[1],
                     "error_own_compute_pct": 100.0 * (preds[1] - meas) / meas,
                     "oversubscribed": per_host * threads > cores_on_host(),
                     "loadavg": r.loadavg, **extra})
    return rows
