"""Everything ``hvdscale predict`` does, from its options (``PredictSpec``) to the result."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hvdscale.config import RunConfig, load_config
from hvdscale.errors import HvdscaleError
from hvdscale.records.run import RunRecord
from hvdscale.study.predict.compute import (
    ComputeModel,
    compute_from_rate,
    compute_from_records,
    load_records,
)
from hvdscale.study.predict.forecast import predict, validate
from hvdscale.study.predict.inputs import (
    Network,
    gradient_bytes,
    network_from_args,
    network_from_comm,
    parse_ranks,
    reduced_bytes_per_step,
)
from hvdscale.study.predict.output import plot


@dataclass(frozen=True)
class PredictSpec:
    """``hvdscale predict``'s options besides the config: the rank counts, the network (a
    commbench result ``comm`` with its ``transport``, or ``latency`` and ``bandwidth``), the
    compute time (``records``, or ``words_per_s`` / ``compute_ms``) and the model's knobs."""

    ranks: str = "1,2,4,...,512"
    comm: str | None = None
    latency: str | None = None
    bandwidth: str | None = None
    mem_bandwidth: str | None = None
    records: str | None = None
    words_per_s: float | None = None
    compute_ms: float | None = None
    scaling: str = "weak,strong"
    backward_fraction: float = 2 / 3
    servers: int | None = None
    transport: str = ""
    fit: str | None = None
    """A results directory of one experiment: fit the model to its points (``ownfit``)."""
    fit_link: str | None = None
    """``FROM,TO``: commbench results of the fit's link and of a link to carry it to
    (``carry``)."""


def _scalings(spec: PredictSpec) -> list[str]:
    """The scaling modes asked for, after checking the options that need no input read."""
    scalings = [s.strip() for s in spec.scaling.split(",") if s.strip()]
    if not scalings or any(s not in ("weak", "strong") for s in scalings):
        raise HvdscaleError(f"--scaling must be weak, strong or weak,strong "
                            f"(got {spec.scaling!r})")
    if not 0 <= spec.backward_fraction <= 1:
        raise HvdscaleError(f"--backward-fraction must be in [0, 1] "
                            f"(got {spec.backward_fraction})")
    if spec.servers is not None and spec.servers < 1:
        raise HvdscaleError(f"--servers must be >= 1 (got {spec.servers})")
    return scalings


def _network(spec: PredictSpec) -> Network:
    if spec.comm and (spec.latency or spec.bandwidth):
        raise HvdscaleError("give either --comm DIR or --latency and --bandwidth, not both")
    if spec.comm:
        return network_from_comm(spec.comm, spec.transport)
    if spec.latency and spec.bandwidth:
        return network_from_args(spec.latency, spec.bandwidth, spec.mem_bandwidth)
    raise HvdscaleError("the network is missing: give --comm DIR (from hvdscale commbench) "
                        "or --latency and --bandwidth (e.g. --latency 5us --bandwidth 25Gbit)")


def _compute_model(cfg: RunConfig, spec: PredictSpec, recs: list[RunRecord], net: Network,
                   tensors: list[int]) -> ComputeModel:
    words_per_s, compute_ms = spec.words_per_s, spec.compute_ms
    if words_per_s or compute_ms:
        if (words_per_s or 1) <= 0 or (compute_ms or 1) <= 0:
            raise HvdscaleError("--single-rate and --compute-ms must be positive")
        return compute_from_rate(cfg, words_per_s, compute_ms)
    if recs:
        return compute_from_records(recs, net, tensors)
    raise HvdscaleError("the compute time is missing: give --records RESULTS (with a "
                        "1-rank run of this config), --single-rate WORDS_PER_S or "
                        "--compute-ms MS")


def run_predict(config: str, sets: list[str], spec: PredictSpec,
                plot_path: str | None = None) -> dict[str, Any]:
    """Everything ``hvdscale predict`` does; returns the result (tables rendered by render).

    Raises:
        HvdscaleError: one clear message for bad or missing input.
    """
    cfg = load_config(config, sets)
    rank_list = parse_ranks(spec.ranks)
    scalings = _scalings(spec)
    if spec.fit:
        return run_fitted(cfg, config, sets, spec, rank_list, plot_path)
    if spec.fit_link:
        raise HvdscaleError("--fit-link carries a fit to another link: give it with --fit "
                            "RESULTS")
    net = _network(spec)
    tensors = gradient_bytes(cfg)
    recs = load_records(spec.records, cfg) if spec.records else []
    cm = _compute_model(cfg, spec, recs, net, tensors)
    bf = spec.backward_fraction
    pred = predict(cfg, rank_list, net, cm, scalings, bf, spec.servers)
    result = {"kind": "predict", "config": str(config), "overrides": sets, "ranks": rank_list,
              "network": net.__dict__, "compute": {**cm.__dict__}, "prediction": pred,
              "validation": validate(recs, tensors, net, cm, bf) if recs else [],
              "fitted": False}
    if plot_path:
        plot(result, Path(plot_path))
    return result


def run_fitted(cfg: RunConfig, config: str, sets: list[str], spec: PredictSpec,
               ranks: list[int], plot_path: str | None) -> dict[str, Any]:
    """``predict --fit RESULTS``: the model fitted to the results' points (see ``ownfit``).

    Raises:
        HvdscaleError: no records, mixed experiments, a missing n, one rank count.
    """
    from hvdscale.records.store import read_records
    from hvdscale.study.predict.carry import carry_fit, parse_fit_link
    from hvdscale.study.predict.fitoutput import plot_fit
    from hvdscale.study.predict.ownfit import fit_records

    if not Path(spec.fit or "").exists():
        raise HvdscaleError(f"--fit {spec.fit}: no such results directory or file")
    recs = [r for r in read_records(spec.fit) if isinstance(r, RunRecord)]
    servers = spec.servers  # None: k from the records (ownfit.servers_of)
    links = parse_fit_link(spec.fit_link) if spec.fit_link else None
    fit = fit_records(recs, reduced_bytes_per_step(cfg), servers, ranks,
                      spec.backward_fraction)
    if links:
        fit = carry_fit(fit, *links)
    result = {"kind": "predict-fit", "fitted": True, "config": str(config), "overrides": sets,
              "records": str(spec.fit), "ranks": ranks, "fit": fit}
    if plot_path:
        measured: dict[str, list[tuple[int, float]]] = {}
        for r in recs:
            measured.setdefault(r.strategy_name, []).append((r.workers, r.words_per_s))
        plot_fit(result, measured, Path(plot_path))
    return result
