"""Complete, valid records for tests: a test states the fields it is about and takes the rest
from here, so what it builds reads as the file would (``hvdscale.records.kinds.typed`` checks
every field against its kind).

    rec = run_record("strategy.name=ps", ranks=2, words_per_s=190.0)   # a RunRecord
    line = run_dict(ranks=1, words_per_s=100.0)                        # its JSON object
    bad = failed_record("strategy.name=ps", ranks=2, error="exit 1: boom")

``*sets`` are ``--set`` overrides of the default config (``name=t`` first); ``cfg`` takes a
``RunConfig`` instead. Keyword fields replace the template's, except the sections whose keys
are all required (``measure``, ``step_time``, ``threads``, ``device``), which are merged into
the template's, so ``step_time={"jitter": 0.002}`` changes only the jitter.
"""

from __future__ import annotations

from typing import Any

from hvdscale.config import RunConfig, load_config, to_dict
from hvdscale.records.failed import FailedRecord
from hvdscale.records.gemm import GemmRecord
from hvdscale.records.kinds import typed
from hvdscale.records.launch import LaunchCost
from hvdscale.records.migrate import SCHEMA_VERSION
from hvdscale.records.run import RunRecord
from hvdscale.records.store import record_key

STARTED = "2026-01-01T00:00:00+00:00"
FINISHED = "2026-01-01T00:00:10+00:00"
MERGED = ("measure", "step_time", "threads", "device")
"""Sections merged into the template's rather than replaced."""


def _config(sets: tuple[str, ...], cfg: RunConfig | None) -> RunConfig:
    return cfg if cfg is not None else load_config(None, ["name=t", *sets])


def _padding_entry(words: int, slots: int) -> dict[str, Any]:
    return {"words": words, "slots": slots, "padded_fraction": 1 - words / slots,
            "padding_ratio": slots / words, "rnn_work_slots": words, "work_ratio": 1.0}


def run_dict(*sets: str, cfg: RunConfig | None = None, ranks: int = 1,
             workers: int | None = None, words_per_s: float = 1000.0,
             **fields: Any) -> dict[str, Any]:
    """A run record's JSON object, as ``hvdscale run`` writes it, for the config ``sets``
    (or ``cfg``) at ``ranks``."""
    cfg = _config(sets, cfg)
    workers = cfg.strategy.workers(ranks) if workers is None else workers
    window_s, steps = 1.0, cfg.measure.steps
    words = round(words_per_s * window_s)
    per_worker = words // max(1, workers)
    rec: dict[str, Any] = {
        "schema": SCHEMA_VERSION, "kind": "run", "status": "ok", "name": cfg.name,
        "started": STARTED, "finished": FINISHED, "argv": ["hvdscale", "run"],
        "config": to_dict(cfg), "key": record_key(cfg), "ranks": ranks, "workers": workers,
        "hosts": ["localhost"], "rank_hosts": ["localhost"] * ranks,
        "launcher_backend": "mpi",
        "threads": {"intra_op": 1, "inter_op": 1, "mpi_yield_when_idle": None},
        "horovod_env": {}, "horovod_used": None, "loadavg": [0.5, 0.5, 0.5], "host_cores": 16,
        "versions": {"python": "3", "mpi": "Open MPI v5"}, "git": None, "strategy": {},
        "model_params": 1000, "vocab": {"src": cfg.model.src_vocab, "tgt": cfg.model.tgt_vocab},
        "truncated_sentences_rank0": 0,
        "measure": {"warmup_steps": cfg.measure.warmup_steps, "steps": steps, "epochs": 0,
                    "aligned_buckets": False, "bucketing_mode": "per_rank",
                    "batches_per_rank": []},
        "padding": {"window": _padding_entry(words, 2 * words),
                    "epoch_configured": _padding_entry(1000, 2000),
                    "epoch_unbucketed": _padding_entry(1000, 2000),
                    "epoch_pad_to_max": _padding_entry(1000, 3000)},
        "final_loss": 7.0, "fingerprints": [{"sum": 1.0, "l2": 1.0}] * ranks,
        "memory": [{"rank": r, "peak_rss_mb": 500.0, "rss_first_mb": 400.0,
                    "rss_last_mb": 400.0, "peak_gpu_mem_mb": None} for r in range(ranks)],
        "device": {"requested": "cpu", "gpu": None, "per_rank": []},
        "per_rank": [{"rank": r, "words": per_worker, "window_s": window_s,
                      "step_time_median": window_s / steps} for r in range(ranks)],
        "window_s": window_s, "words": words, "words_per_s": words_per_s,
        "per_rank_words_per_s": [per_worker / window_s] * workers,
        "sentences": 100, "loss_tokens": words // 2, "padded_tokens": 2 * words,
        "padded_fraction": 0.5, "idle": {},
        "rank_times": [{"rank": r, "words": per_worker, "window_s": window_s, "steps": steps,
                        "step_s": window_s, "compute_s": 0.8 * window_s}
                       for r in range(workers)],
        "step_time": {"n": steps, "median": window_s / steps, "jitter": 0.001,
                      "mean": window_s / steps, "ci95": 0.001, "min": 0.9 * window_s / steps,
                      "max": 1.1 * window_s / steps},
        "step_time_deciles": [], "warmup_time_s": 0.5, "mean_loss": 7.0}
    for k, v in fields.items():
        rec[k] = {**rec[k], **v} if k in MERGED and isinstance(v, dict) else v
    return rec


def run_record(*sets: str, cfg: RunConfig | None = None, **fields: Any) -> RunRecord:
    """``run_dict``'s record, typed (checked as a file's would be)."""
    rec = typed(run_dict(*sets, cfg=cfg, **fields), "a test's run record")
    assert isinstance(rec, RunRecord)
    return rec


def failed_dict(*sets: str, cfg: RunConfig | None = None, ranks: int = 1,
                error: str = "exit 1: boom", **fields: Any) -> dict[str, Any]:
    """A failed point's record's JSON object, as the sweep writes it."""
    cfg = _config(sets, cfg)
    return {"schema": SCHEMA_VERSION, "kind": "failed", "status": "failed", "name": cfg.name,
            "started": STARTED, "finished": FINISHED, "ranks": ranks,
            "workers": cfg.strategy.workers(ranks), "config": to_dict(cfg),
            "key": record_key(cfg), "error": error, **fields}


def failed_record(*sets: str, cfg: RunConfig | None = None, **fields: Any) -> FailedRecord:
    """``failed_dict``'s record, typed."""
    rec = typed(failed_dict(*sets, cfg=cfg, **fields), "a test's failed record")
    assert isinstance(rec, FailedRecord)
    return rec


def gemm_dict(**fields: Any) -> dict[str, Any]:
    """A ``hvdscale gemm`` record's JSON object (one fp32 curve without rows)."""
    return {"schema": SCHEMA_VERSION, "kind": "gemm", "status": "ok", "started": STARTED,
            "finished": FINISHED, "host": "localhost", "threads": 1, "clock": "wall",
            "gates": 4, "repeats": 3, "warmup": 1, "min_time_s": 0.01, "hidden": [512],
            "batch": [32], "loadavg": {"before": [0.5, 0.5, 0.5], "after": [0.5, 0.5, 0.5]},
            "versions": {"mpi": "Open MPI v5"}, "git": None,
            "frameworks": [{"precision": "fp32", "rows": [], "peak": {"gflops": 1.0}}],
            **fields}


def gemm_record(**fields: Any) -> GemmRecord:
    """``gemm_dict``'s record, typed."""
    rec = typed(gemm_dict(**fields), "a test's gemm record")
    assert isinstance(rec, GemmRecord)
    return rec


def launch_cost(**fields: Any) -> LaunchCost:
    """One line of a sweep's ``sweep_timing.jsonl``, typed."""
    rec = typed({"kind": "launch", "point": "torch horovod np=1", "round": 0,
                 "at": 1767225610.0, "launch_s": 10.0, **fields}, "a test's timing line")
    assert isinstance(rec, LaunchCost)
    return rec
