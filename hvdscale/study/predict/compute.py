"""predict's compute model: compute seconds per step against the words each rank handles,
fitted on 1-worker records (or given as a single-device rate), plus the 1-worker rest of a step;
and the facts predict reads from a run record."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hvdscale.config import RunConfig
from hvdscale.errors import HvdscaleError
from hvdscale.records.run import RunRecord
from hvdscale.study.predict.cost import CommSetup, comm_time
from hvdscale.study.predict.inputs import Network


@dataclass
class ComputeModel:
    """compute(words per rank per step) = c0 + c1 x words; plus the 1-worker rest of a step."""

    c0: float
    c1: float
    words_per_step: float
    """Words per rank per step at the config's batch with 1 worker."""
    overhead: dict[str, float] = field(default_factory=dict)
    """Measured 1-worker step time minus compute and modelled communication, per strategy."""
    source: str = ""
    slowdown: dict[int, float] = field(default_factory=dict)
    """Per worker count, the independent replicas' measured compute over ``compute``'s: what
    ranks sharing a machine's memory and caches cost each other with no communication, and the
    machine's state when they ran (1.0 where not measured)."""

    def compute(self, words: float) -> float:
        """Compute seconds per step for ``words`` words per rank."""
        return self.c0 + self.c1 * words

    def compute_at(self, words: float, n: int) -> float:
        """Compute seconds per step for ``words`` words per rank among ``n`` workers."""
        return self.compute(words) * self.slowdown.get(n, 1.0)

    def rest(self, strategy: str) -> float:
        """The 1-worker non-compute time per step for ``strategy`` (any strategy's if its own
        was not measured)."""
        if strategy in self.overhead:
            return self.overhead[strategy]
        vals = list(self.overhead.values())
        return float(np.median(vals)) if vals else 0.0


def _same_model(rec: RunRecord, cfg: RunConfig) -> bool:
    from hvdscale.records.experiment import identity

    # Compared as identities: where a custom model's module was found does not matter, and
    # records from before the custom-model fields keep matching.
    return (rec.config.framework == cfg.framework
            and identity(rec.config).get("model") == identity(cfg).get("model"))


def _rank_compute(rec: RunRecord) -> list[float]:
    """Per computing rank, compute seconds per measured step."""
    steps = rec.idle.steps or rec.measured_steps  # UNSET in older files
    return [p.compute_s / steps for p in rec.idle_per_rank]


def has_comm_core(rec: RunRecord) -> bool:
    """Whether each host of the run had a core to spare beyond its ranks' compute threads: a
    communication thread (Horovod's, gloo's, MPI's progress on TCP, all polling) overlaps
    backward only on a core of its own; on a core the compute needs it takes its time from
    the compute, and nothing is hidden. A rank bound to fewer cores than its host has
    (``threads.cores``, its CPU affinity) has those to itself; unbound, its host's cores are
    shared by the host's ranks. True where the record says no cores."""
    own, host = rec.threads.cores, rec.host_cores
    if isinstance(own, int) and host and own < host:
        return own >= rec.intra_op_threads + 1
    if not host:
        return True
    per_host = -(-rec.ranks // max(1, len(rec.hosts or [""])))
    return host >= per_host * (rec.intra_op_threads + 1)


def slowdowns(records: list[RunRecord], cm: ComputeModel) -> dict[int, float]:
    """Per worker count > 1, the independent replicas' measured compute per step over what
    ``cm`` gives for their words (the median over their records): so ``cm.compute_at`` at n is
    the compute the replicas measured at n, taken in the same launch as the other strategies'
    points at n, not minutes before at 1 worker (none without such records)."""
    per_n: dict[int, list[float]] = {}
    for r in records:
        if r.strategy_name == "independent" and r.workers > 1:
            per_n.setdefault(r.workers, []).append(
                float(np.mean(_rank_compute(r))) / cm.compute(record_words_per_step(r)))
    return {n: float(np.median(v)) for n, v in per_n.items()}


def critical_compute(rec: RunRecord) -> float:
    """The run's own compute on a step's critical path: each step waits for its slowest rank,
    so a rank's compute plus its straggler idle, per step, averaged over ranks."""
    steps = rec.idle.steps or rec.measured_steps  # UNSET in older files
    return float(np.mean([(p.compute_s + p.idle_s) / steps for p in rec.idle_per_rank]))


def _check_record(rec: Any, where: str) -> None:
    try:
        assert isinstance(rec, RunRecord)
        ok = rec.window_s > 0 and rec.words > 0 and rec.measured_steps > 0
        assert ok and rec.workers >= 1 and _rank_compute(rec)
    except (AssertionError, KeyError, TypeError, ZeroDivisionError):
        raise HvdscaleError(f"{where}: a record without the timings predict needs (window_s, "
                            "words, measure.steps, workers, idle.per_rank compute_s)") from None


def load_records(path: str | Path, cfg: RunConfig) -> list[RunRecord]:
    """The ok records of ``cfg``'s model (and framework) under ``path``.

    Raises:
        HvdscaleError: no results there, malformed records, or none of this model.
    """
    from hvdscale.records.store import read_records

    recs = read_records(path)
    mine = [r for r in recs if isinstance(r, RunRecord) and _same_model(r, cfg)]
    if not mine:
        raise HvdscaleError(f"{path}: no successful record of this config's model "
                            f"({cfg.model.kind}/{cfg.model.rnn_impl}, {cfg.framework}) among "
                            f"{len(recs)} record(s)")
    for r in mine:
        _check_record(r, str(path))
    return mine


def record_words_per_step(rec: RunRecord) -> float:
    """Words per rank per measured step of a record."""
    return rec.words / rec.measured_steps / rec.workers


def compute_from_records(records: list[RunRecord], net: Network,
                         tensors: list[int]) -> ComputeModel:
    """Fit compute per step against words per rank per step on the 1-worker records.

    Raises:
        HvdscaleError: no 1-worker record among them.
    """
    ones = [r for r in records if r.workers == 1]
    if not ones:
        raise HvdscaleError("the records hold no 1-worker run of this model: predict needs one "
                            "to measure the compute time (run the config at np=1)")
    x = np.array([record_words_per_step(r) for r in ones])
    y = np.array([float(np.mean(_rank_compute(r))) for r in ones])
    if len(set(np.round(x))) >= 2:
        c1, c0 = np.polyfit(x, y, 1)
        how = f"c0 + c1 x words fitted on {len(ones)} 1-worker records"
    else:
        c0, c1 = 0.0, float(np.median(y / x))
        how = (f"proportional to the per-rank words (one batch size among {len(ones)} "
               "1-worker records)")
    overhead: dict[str, list[float]] = {}
    for r in ones:
        s = record_strategy(r)
        step = r.window_s / r.measured_steps
        comm = comm_time(s, 1, tensors, net, 0.0, 0.0, CommSetup.of_record(r.config))
        overhead.setdefault(s, []).append(step - float(np.mean(_rank_compute(r))) - comm)
    cm = ComputeModel(float(c0), float(c1), float(np.median(x)),
                      {k: float(np.median(v)) for k, v in overhead.items()})
    cm.slowdown = slowdowns(records, cm)
    seen = f"; x {', '.join(f'{v:.3f} at {n}' for n, v in sorted(cm.slowdown.items()))}: " \
        "the independent replicas' measured compute there" if cm.slowdown else ""
    cm.source = f"records: compute {how}{seen}; 1-worker rest of the step per strategy"
    return cm


def compute_from_rate(cfg: RunConfig, words_per_s: float | None, compute_ms: float | None,
                      words_per_step: float | None = None) -> ComputeModel:
    """Compute time from a single-device rate (words/s) or a step time, proportional to the
    per-rank words; words per step estimated from the config's data when not given."""
    wps = words_per_step or estimate_words_per_step(cfg)
    if words_per_s:
        c1 = 1.0 / words_per_s
        how = f"single-device rate {words_per_s:g} words/s (given)"
    else:
        assert compute_ms is not None
        c1 = compute_ms * 1e-3 / wps
        how = f"compute {compute_ms:g} ms per step (given)"
    return ComputeModel(0.0, c1, wps, {}, f"{how}; {wps:.0f} words per rank per step; "
                        "proportional to the per-rank batch; no other per-step time")


def estimate_words_per_step(cfg: RunConfig, batches: int = 20) -> float:
    """Mean real words per batch of one worker, from the config's own data."""
    from hvdscale.core.batching import make_plan
    from hvdscale.corpora.corpus import load_corpus

    corpus = load_corpus(cfg.data, cfg.model.data_kind, cfg.model.src_vocab, cfg.model.tgt_vocab,
                         0, 1)
    it = make_plan(corpus, cfg.data, cfg.model.data_kind, 0, 1).batches()
    return float(np.mean([next(it).words for _ in range(batches)]))


def record_strategy(rec: RunRecord) -> str:
    """The strategy a record ran (``horovod``, ``ps``, ``independent``)."""
    return rec.strategy_name
