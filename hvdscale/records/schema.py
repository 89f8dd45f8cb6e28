"""What a record holds: the schema version every writer stamps, and the fields other wings read.

A record is one JSON object per line of ``results.jsonl`` (``hvdscale.records.store``). Writers
(the runner, the sweep's failure records, ``gemm``, ``batch``, ``profile``, ``commbench``) stamp
``SCHEMA_VERSION``; readers (the report, the predictor, the sweep, the benches in bench/) go
through the accessors below, so a field renamed or moved is changed here once. Accessors of
required fields raise ``KeyError`` as the dict would (a record missing them is malformed);
optional ones return ``None``, an empty dict or list, or the default named.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SCHEMA_VERSION = 1
RUN_KIND = "run"  # a training run's record; other kinds: gemm, batch, profile, commbench

Record = Mapping[str, Any]


def error(rec: Record) -> str:
    """Why a failed run or point failed (one line); ``""`` where the record says nothing."""
    return rec.get("error", "")


def status(rec: Record) -> str | None:
    """``ok`` or ``failed``; ``None`` for a record that says neither."""
    return rec.get("status")


def is_ok(rec: Record) -> bool:
    """The record of a completed run or measurement."""
    return rec.get("status") == "ok"


def kind(rec: Record) -> str:
    """What measured it: ``run`` (the default, a training run) or a study tool's kind."""
    return rec.get("kind", RUN_KIND)


def is_run(rec: Record) -> bool:
    """A training run's record (not a gemm, batch, profile or commbench one)."""
    return kind(rec) == RUN_KIND


def ok_run(rec: Record) -> bool:
    """A completed training run: what scaling tables and fits are made of."""
    return is_ok(rec) and is_run(rec)


def config(rec: Record) -> dict[str, Any]:
    """The run's whole config, as ``hvdscale.config.to_dict`` wrote it."""
    return rec["config"]


def config_or_empty(rec: Record) -> dict[str, Any]:
    """The config, or ``{}`` where a (failed or foreign) record has none."""
    return rec.get("config") or {}


def strategy_name(rec: Record) -> str:
    """The configured strategy's name (``horovod``, ``ps``, ``ddp``...)."""
    return rec["config"]["strategy"]["name"]


def horovod_settings(rec: Record) -> dict[str, Any]:
    """The config's Horovod section (fusion threshold, cycle time, overlap, autotune...)."""
    return rec["config"]["strategy"]["horovod"]


def key(rec: Record) -> dict[str, Any]:
    """The point's identity (``hvdscale.records.experiment.record_key``)."""
    return rec["key"]


def name(rec: Record) -> str:
    """The config's name as the run recorded it."""
    return rec["name"]


def ranks(rec: Record) -> int:
    """Ranks launched."""
    return rec["ranks"]


def workers(rec: Record) -> int:
    """Ranks that computed gradients (a parameter server's servers do not)."""
    return rec["workers"]


def words_per_s(rec: Record) -> float:
    """Target words per second over the measured window, all workers together."""
    return rec["words_per_s"]


def words(rec: Record) -> int:
    """Target words trained in the measured window."""
    return rec["words"]


def window_s(rec: Record) -> float:
    """Seconds of the measured window (warm-up excluded)."""
    return rec["window_s"]


def measured_steps(rec: Record) -> int:
    """Steps in the measured window."""
    return rec["measure"]["steps"]


def final_loss(rec: Record) -> float:
    """The training loss at the run's last step."""
    return rec["final_loss"]


def measure(rec: Record) -> dict[str, Any]:
    """What the window measured: its steps, warm-up steps, batches per rank, bucketing mode."""
    return rec["measure"]


def padding(rec: Record) -> dict[str, Any]:
    """The padding summary: the window's words and slots, each epoch's padded fractions."""
    return rec["padding"]


def padded_fraction(rec: Record) -> float:
    """Share of the window's token slots that were padding."""
    return rec["padded_fraction"]


def padding_window(rec: Record) -> dict[str, Any]:
    """The measured window's ``words``, padded ``slots`` and ``rnn_work_slots``."""
    return rec["padding"]["window"]


def model_config(rec: Record) -> dict[str, Any]:
    """The config's ``model`` section (sizes, ``rnn_impl``)."""
    return rec["config"]["model"]


def configured_precision(rec: Record) -> str:
    """The configured precision (``fp32`` where the config predates the setting)."""
    return rec["config"].get("precision", "fp32")


def precision_in_force(rec: Record) -> dict[str, Any]:
    """The precision the ranks computed in: its dtypes (``grads``...) and the ``wire`` dtype."""
    return rec["precision"]


def compile_info(rec: Record) -> dict[str, Any]:
    """What compiling the step cost (``compile_s``...); ``{}`` where nothing was compiled."""
    return rec.get("compile") or {}


def model_params(rec: Record) -> int:
    """Trainable parameters of the model."""
    return rec["model_params"]


def memory(rec: Record) -> list[dict[str, Any]]:
    """Per rank, its peak resident memory and that at the window's first and last step (MB)."""
    return rec["memory"]


def device(rec: Record) -> dict[str, Any]:
    """Where the ranks computed: the requested device, the GPU's name, per rank's device."""
    return rec["device"]


def rank_hosts(rec: Record) -> list[str] | None:
    """Each rank's host, in rank order, where the record says."""
    return rec.get("rank_hosts")


def hosts(rec: Record) -> list[str]:
    """The hosts the ranks ran on; empty where the record does not say."""
    return rec.get("hosts") or []


def intra_op_threads(rec: Record) -> int:
    """Intra-op threads a rank used (1 where the record does not say)."""
    return (rec.get("threads") or {}).get("intra_op", 1) or 1


def loadavg(rec: Record) -> list[float] | None:
    """The host's load averages when the run finished."""
    return rec.get("loadavg")


def strategy_info(rec: Record) -> dict[str, Any]:
    """What the strategy reported of itself (timeline, compute_includes_allreduce...)."""
    return rec.get("strategy") or {}


def timeline_summary(rec: Record) -> dict[str, Any]:
    """The Horovod timeline's summary (``median``, ``cycles``, ``buffers``); ``{}`` where the run
    captured no timeline."""
    tl = strategy_info(rec).get("timeline") or {}
    return tl.get("summary") or {}


def startup(rec: Record) -> dict[str, Any] | None:
    """The start-up marks (``hvdscale.records.startup``), where the run recorded them."""
    value = rec.get("startup")
    return value if isinstance(value, dict) else None


def idle(rec: Record) -> dict[str, Any]:
    """Straggler idle: per computing rank its compute and idle seconds, their steps; ``{}`` where
    the run did not measure it."""
    return rec.get("idle") or {}


def idle_fraction(rec: Record) -> float:
    """Share of the computing ranks' time spent waiting for slower ranks (0 where unmeasured)."""
    return idle(rec).get("idle_fraction", 0.0)


def idle_ms_per_step(rec: Record) -> float:
    """Milliseconds per step a computing rank waits for others, mean over ranks (0 where
    unmeasured)."""
    return idle(rec).get("idle_ms_per_step", 0.0)


def idle_per_rank(rec: Record) -> list[dict[str, Any]]:
    """Per computing rank: its ``rank``, ``idle_ms_per_step`` and ``idle_steps``."""
    return idle(rec).get("per_rank", [])


def rank_times(rec: Record) -> list[dict[str, Any]]:
    """Per rank, its step, compute and communication seconds over the measured window."""
    return rec["rank_times"]


def step_time(rec: Record) -> dict[str, Any]:
    """The step-time statistics over the window (mean, jitter...)."""
    return rec["step_time"]


def step_median_s(rec: Record) -> float:
    """The median step time over the window, in seconds."""
    return rec["step_time"]["median"]


def step_time_deciles(rec: Record) -> list[float]:
    """Step-time deciles over the window, in seconds."""
    return rec["step_time_deciles"]


def quality(rec: Record) -> dict[str, Any]:
    """Training to a target: its ``until``, evaluation curve, verdict and time to target."""
    return rec["quality"]


def quality_or_empty(rec: Record) -> dict[str, Any]:
    """``quality``, or ``{}`` for a run that evaluated nothing."""
    return rec.get("quality") or {}


def warmup_s(rec: Record) -> float:
    """Seconds of the warm-up steps (the slowest rank's), 0 when not recorded."""
    return float(rec.get("warmup_time_s") or 0.0)


def fingerprints(rec: Record) -> list[Any]:
    """Each rank's fingerprint of the parameters at the window's end (None: a serving rank)."""
    return rec["fingerprints"]


def interval(rec: Record) -> dict[str, Any] | None:
    """The precision target's blocks and interval (``measure.target_rel_ci``; None without)."""
    got = rec.get("interval")
    return got if isinstance(got, dict) else None


def launch(rec: Record) -> dict[str, Any] | None:
    """The record's place in a launch of several points (None: a launch of its own)."""
    got = rec.get("launch")
    return got if isinstance(got, dict) else None
