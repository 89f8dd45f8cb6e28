"""``hvdscale predict``: step time, words/s and efficiency past the ranks measured here.

Inputs: the model's gradient bytes per tensor (the model built on PyTorch's meta device: no
memory; the TensorFlow models have the same layout), the compute time per step and how it grows
with the per-rank batch (fitted on 1-worker records, or given as a single-device rate), and the
network (a commbench result, or a latency and a bandwidth).

Costs (alpha: latency per message, beta: seconds per byte of one rank's link):

- ring allreduce of B bytes over n ranks: o + 2(n-1) alpha + 2(n-1)/n B beta, with o a fixed
  per-operation overhead (Horovod's coordination cycle, measured by commbench as Horovod's
  latency above mpi4py's; 0 with --latency/--bandwidth). Gradients are fused in backward order
  into buckets up to the fusion threshold. Without overlap the buckets run after backward; with
  overlap a tensor's gradient is ready when backward has reached it (backward time spread over
  the tensors by their bytes) and a bucket starts when the link is free, taking every ready
  tensor up to the threshold.
- parameter server (push, then pull; no overlap, as strategies/param_server.py): 2 (m alpha +
  f M beta) + a server update of (W + 2) shard bytes at the memory bandwidth, with m messages
  and a share f of the model M through the busiest rank per phase (``commbench.ps_phase``):
  k dedicated servers beside n workers, or every rank serving 1/n (colocated, sharded).

Step time = compute(per-rank batch) + the strategy's exposed communication + the 1-worker
non-compute time per step (optimizer, data, loop), taken from the records. Weak scaling keeps
the per-rank batch; strong scaling divides the global batch (compute = c0 + c1 x words).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hvdscale.config import RunConfig, load_config, to_dict
from hvdscale.errors import HvdscaleError
from hvdscale.study.commbench import load_commbench, ps_phase

HOROVOD_DEFAULT_FUSION_MB = 128.0
OVERSUBSCRIBED = "oversubscribed (more rank threads than cores)"
STRATEGIES = ("ring", "ring-overlap", "ps-dedicated", "ps-sharded")
LABELS = {"ring": "ring allreduce, no overlap", "ring-overlap": "ring allreduce, overlapped",
          "ps-dedicated": "PS, dedicated servers", "ps-sharded": "PS, colocated sharded"}


# --- inputs -----------------------------------------------------------------------------------

def parse_ranks(text: str) -> list[int]:
    """``"1,2,4,...,512"`` (``...`` doubles up to the last) -> sorted rank counts."""
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    out: set[int] = set()
    for i, t in enumerate(items):
        if t == "...":
            if i == 0 or i == len(items) - 1 or not items[i - 1].isdigit() or \
                    not items[i + 1].isdigit():
                raise HvdscaleError(f"--ranks {text!r}: '...' must sit between two numbers")
            r = int(items[i - 1])
            while r < int(items[i + 1]):
                out.add(r)
                r *= 2
            continue
        if not t.isdigit() or int(t) < 1:
            raise HvdscaleError(f"--ranks entries must be positive integers (got {t!r})")
        out.add(int(t))
    if not out:
        raise HvdscaleError("--ranks needs rank counts, e.g. 1,2,4,8,64,512")
    return sorted(out)


_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_RATE = {"bit": 1 / 8, "kbit": 1e3 / 8, "mbit": 1e6 / 8, "gbit": 1e9 / 8, "b": 1.0,
         "kb": 1e3, "mb": 1e6, "gb": 1e9}


def parse_latency(text: str) -> float:
    """``"5us"`` -> 5e-6 s (s, ms, us/µs, ns)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?(?:e-?\d+)?)\s*(s|ms|us|µs|ns)\s*", str(text))
    if not m:
        raise HvdscaleError(f"--latency {text!r}: give a time such as 5us or 0.01ms")
    return float(m.group(1)) * _TIME[m.group(2)]


def parse_bandwidth(text: str) -> float:
    """``"25Gbit"`` / ``"25Gbit/s"`` -> bytes/s (also Mbit, GB/s, MB/s; decimal units)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)(bit|b|B)(?:/s|ps)?\s*", str(text))
    if not m:
        raise HvdscaleError(f"--bandwidth {text!r}: give a rate such as 25Gbit or 3GB/s")
    unit = (m.group(2).lower() + ("bit" if m.group(3) in ("bit", "b") else "b"))
    value = float(m.group(1)) * _RATE[unit]
    if value <= 0:
        raise HvdscaleError(f"--bandwidth {text!r} must be positive")
    return value


@dataclass(frozen=True)
class Network:
    """Per-link parameters for ring allreduce and for the parameter server's messages."""

    ring_alpha: float
    ring_beta: float
    ring_overhead: float
    ps_alpha: float
    ps_beta: float
    mem_bw: float | None
    source: str


def network_from_comm(path: str | Path, transport: str = "") -> Network:
    """Link parameters from a commbench result (see the module docstring).

    Raises:
        HvdscaleError: missing or malformed result, or no allreduce transport in it.
    """
    data = load_commbench(path)
    tr = data["transports"]
    name = transport or next((t for t in ("horovod-mpi", "horovod-gloo", "mpi4py") if t in tr),
                             "")
    if name not in tr or name == "ps":
        raise HvdscaleError(f"{path}: no allreduce transport {'(' + name + ') ' if name else ''}"
                            f"in the commbench result (has {', '.join(tr) or 'none'})")
    n = data["ranks"]
    link = tr[name]["link"]
    alpha, overhead = link["alpha_s"], 0.0
    if name.startswith("horovod") and "mpi4py" in tr:
        # Horovod's latency is mostly its coordination cycle, a fixed cost per operation; only
        # the plain MPI latency grows with the ring's 2(n-1) hops.
        alpha = tr["mpi4py"]["link"]["alpha_s"]
        overhead = max(0.0, link["op_latency_s"] - 2 * (n - 1) * alpha)
    ps = tr.get("ps", {}).get("link") or link
    mem = data.get("memcpy", {}).get("concurrent_GBps")
    return Network(alpha, link["beta_s_per_byte"], overhead, ps["alpha_s"], ps["beta_s_per_byte"],
                   mem * 1e9 if isinstance(mem, int | float) and mem > 0 else None,
                   f"commbench {Path(path)} ({name} at {n} ranks"
                   f"{', ps' if 'ps' in tr else ''})")


def network_from_args(latency: str, bandwidth: str, mem_bandwidth: str | None) -> Network:
    """Link parameters given as a latency and a bandwidth (the same for every strategy)."""
    a, bw = parse_latency(latency), parse_bandwidth(bandwidth)
    mem = parse_bandwidth(mem_bandwidth) if mem_bandwidth else None
    return Network(a, 1.0 / bw, 0.0, a, 1.0 / bw, mem,
                   f"latency {latency}, bandwidth {bandwidth}"
                   + (f", memory {mem_bandwidth}" if mem_bandwidth else ""))


def gradient_bytes(cfg: RunConfig) -> list[int]:
    """Gradient bytes of each parameter tensor, in the model's parameter order (fp32, or 2 bytes
    with Horovod's fp16 compression). Built on the meta device: shapes only, no memory."""
    import torch

    from hvdscale.models.torch import build_model

    m = cfg.model
    with torch.device("meta"):
        model = build_model(m.kind, m.rnn_impl, m.src_vocab, m.tgt_vocab or m.src_vocab,
                            m.embed_dim, m.hidden_size, m.encoder_layers, m.decoder_layers,
                            m.bidirectional, m.attention)
    width = 2 if cfg.strategy.horovod.compression == "fp16" else 4
    return [p.numel() * width for p in model.parameters() if p.requires_grad]


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

    def compute(self, words: float) -> float:
        return self.c0 + self.c1 * words

    def rest(self, strategy: str) -> float:
        """The 1-worker non-compute time per step for ``strategy`` (any strategy's if its own
        was not measured)."""
        if strategy in self.overhead:
            return self.overhead[strategy]
        vals = list(self.overhead.values())
        return float(np.median(vals)) if vals else 0.0


def _same_model(rec: dict, cfg: RunConfig) -> bool:
    c = rec.get("config") or {}
    return (rec.get("status") == "ok" and c.get("framework") == cfg.framework
            and c.get("model") == to_dict(cfg)["model"])


def _rank_compute(rec: dict) -> list[float]:
    """Per computing rank, compute seconds per measured step."""
    idle = rec.get("idle") or {}
    steps = idle.get("steps") or rec["measure"]["steps"]
    return [p["compute_s"] / steps for p in idle.get("per_rank", [])]


def _critical_compute(rec: dict) -> float:
    """The run's own compute on a step's critical path: each step waits for its slowest rank,
    so a rank's compute plus its straggler idle, per step, averaged over ranks."""
    idle = rec.get("idle") or {}
    steps = idle.get("steps") or rec["measure"]["steps"]
    return float(np.mean([(p["compute_s"] + p.get("idle_s", 0.0)) / steps
                          for p in idle.get("per_rank", [])]))


def _check_record(rec: Any, where: str) -> None:
    try:
        assert isinstance(rec, dict)
        ok = rec["window_s"] > 0 and rec["words"] > 0 and rec["measure"]["steps"] > 0
        assert ok and rec["workers"] >= 1 and _rank_compute(rec)
    except (AssertionError, KeyError, TypeError, ZeroDivisionError):
        raise HvdscaleError(f"{where}: a record without the timings predict needs (window_s, "
                            "words, measure.steps, workers, idle.per_rank compute_s)") from None


def load_records(path: str | Path, cfg: RunConfig) -> list[dict]:
    """The ok records of ``cfg``'s model (and framework) under ``path``.

    Raises:
        HvdscaleError: no results there, malformed records, or none of this model.
    """
    from hvdscale.records.store import read_records

    recs = read_records(path)
    mine = [r for r in recs if isinstance(r, dict) and _same_model(r, cfg)]
    if not mine:
        raise HvdscaleError(f"{path}: no successful record of this config's model "
                            f"({cfg.model.kind}/{cfg.model.rnn_impl}, {cfg.framework}) among "
                            f"{len(recs)} record(s)")
    for r in mine:
        _check_record(r, str(path))
    return mine


def _words_per_step(rec: dict) -> float:
    return rec["words"] / rec["measure"]["steps"] / rec["workers"]


def compute_from_records(records: list[dict], net: Network, tensors: list[int]) -> ComputeModel:
    """Fit compute per step against words per rank per step on the 1-worker records.

    Raises:
        HvdscaleError: no 1-worker record among them.
    """
    ones = [r for r in records if r["workers"] == 1]
    if not ones:
        raise HvdscaleError("the records hold no 1-worker run of this model: predict needs one "
                            "to measure the compute time (run the config at np=1)")
    x = np.array([_words_per_step(r) for r in ones])
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
        s = _record_strategy(r)
        step = r["window_s"] / r["measure"]["steps"]
        comm = _comm_time(s, 1, tensors, net, 0.0, 0.0, r["config"], r["ranks"])
        overhead.setdefault(s, []).append(step - float(np.mean(_rank_compute(r))) - comm)
    return ComputeModel(float(c0), float(c1), float(np.median(x)),
                        {k: float(np.median(v)) for k, v in overhead.items()},
                        f"records: compute {how}; 1-worker rest of the step per strategy")


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
    from hvdscale.core.data import load_corpus, make_plan

    corpus = load_corpus(cfg.data, cfg.model.kind, cfg.model.src_vocab, cfg.model.tgt_vocab,
                         0, 1)
    it = make_plan(corpus, cfg.data, cfg.model.kind, 0, 1).batches()
    return float(np.mean([next(it).words for _ in range(batches)]))


# --- costs ------------------------------------------------------------------------------------

def ring_cost(nbytes: float, n: int, net: Network) -> float:
    """One ring allreduce of ``nbytes`` over ``n`` ranks."""
    if n <= 1:
        return 0.0
    return net.ring_overhead + 2 * (n - 1) * net.ring_alpha + 2 * (n - 1) / n * nbytes * \
        net.ring_beta


def fuse(tensors_backward: list[int], threshold: float) -> list[int]:
    """Bucket sizes: consecutive tensors (backward order) up to ``threshold`` bytes each."""
    buckets, cur = [], 0
    for b in tensors_backward:
        if cur and cur + b > threshold:
            buckets.append(cur)
            cur = 0
        cur += b
    if cur:
        buckets.append(cur)
    return buckets


def ring_exposed(tensors: list[int], n: int, net: Network, threshold: float, compute: float,
                 backward_fraction: float, overlap: bool) -> float:
    """Communication time not hidden behind backward, for the gradients of one step."""
    back = list(reversed(tensors))  # gradients appear in reverse order of the parameters
    if not overlap:
        return sum(ring_cost(b, n, net) for b in fuse(back, threshold))
    total = float(sum(back))
    fwd = compute * (1 - backward_fraction)
    bwd = compute * backward_fraction
    ready = fwd + bwd * np.cumsum(back) / total
    free, i = 0.0, 0
    while i < len(back):
        start = max(free, ready[i])
        j, size = i, 0
        while j < len(back) and ready[j] <= start + 1e-15 and (size == 0 or
                                                               size + back[j] <= threshold):
            size += back[j]
            j += 1
        free = start + ring_cost(size, n, net)
        i = j
    return max(0.0, free - compute)


def ps_time(model_bytes: float, workers: int, servers: int, placement: str,
            net: Network) -> float:
    """Push + pull through the busiest rank, plus the servers' update of their shard."""
    msgs, frac = ps_phase(workers, servers, placement)
    t = 2 * (msgs * net.ps_alpha + frac * model_bytes * net.ps_beta)
    if net.mem_bw:
        t += (workers + 2) * model_bytes / servers / net.mem_bw
    return t


def _comm_time(strategy: str, n: int, tensors: list[int], net: Network, compute: float,
               backward_fraction: float, config: dict | None, ranks: int | None = None,
               servers: int = 1, threshold: float | None = None) -> float:
    """Exposed communication per step of ``strategy`` with ``n`` workers."""
    if threshold is None:
        mb = ((config or {}).get("strategy", {}).get("horovod", {}).get("fusion_threshold_mb")
              or HOROVOD_DEFAULT_FUSION_MB)
        threshold = mb * 1024 * 1024
    model = float(sum(tensors))
    if strategy in ("ring", "ring-overlap", "horovod"):
        return ring_exposed(tensors, n, net, threshold, compute, backward_fraction,
                            overlap=strategy != "ring")
    if strategy == "ps-dedicated":
        return ps_time(model, n, servers, "dedicated", net)
    if strategy == "ps-sharded":
        return ps_time(model, n, n, "colocated", net)
    if strategy == "ps":  # as recorded: the record's own placement and servers
        ps = (config or {}).get("strategy", {}).get("ps", {})
        k = int(ps.get("num_servers", 1))
        return ps_time(model, n, k, ps.get("placement", "colocated"), net)
    return 0.0  # independent


def _record_strategy(rec: dict) -> str:
    return rec["config"]["strategy"]["name"]


# --- prediction -------------------------------------------------------------------------------

def predict_point(strategy: str, n: int, scaling: str, tensors: list[int], net: Network,
                  cm: ComputeModel, backward_fraction: float, servers: int, threshold: float,
                  batch_size: int) -> dict[str, Any] | None:
    """Predicted step of ``strategy`` with ``n`` workers (None: strong scaling leaves a rank
    no sentence)."""
    if scaling == "strong" and n > batch_size:
        return None
    words = cm.words_per_step / n if scaling == "strong" else cm.words_per_step
    compute = cm.compute(words)
    comm = _comm_time(strategy, n, tensors, net, compute, backward_fraction, None,
                      servers=servers, threshold=threshold)
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
    out: dict[str, Any] = {"model_bytes": int(sum(tensors)), "tensors": len(tensors),
                           "largest_tensor_bytes": int(max(tensors)),
                           "fusion_threshold_bytes": threshold, "servers": k,
                           "backward_fraction": backward_fraction, "scaling": {}}
    for scaling in scalings:
        table: dict[str, list[dict | None]] = {}
        for s in STRATEGIES:
            base = predict_point(s, 1, scaling, tensors, net, cm, backward_fraction, k,
                                 threshold, cfg.data.batch_size)
            rows = []
            for n in ranks:
                p = predict_point(s, n, scaling, tensors, net, cm, backward_fraction, k,
                                  threshold, cfg.data.batch_size)
                if p is not None and base is not None:
                    p["efficiency_pct"] = 100.0 * p["words_per_s"] / (n * base["words_per_s"])
                rows.append(p)
            table[s] = rows
        out["scaling"][scaling] = table
    return out


def validate(records: list[dict], tensors: list[int], net: Network, cm: ComputeModel,
             backward_fraction: float) -> list[dict[str, Any]]:
    """Predicted vs measured words/s for every record: with the compute time from the 1-worker
    fit (a true prediction) and with the record's own measured compute of the slowest rank per
    step (the communication model alone)."""
    from hvdscale.core.threads import cores_on_host

    rows = []
    for r in sorted(records, key=lambda r: (_record_strategy(r), r["ranks"])):
        s, w = _record_strategy(r), r["workers"]
        words = _words_per_step(r)
        own = _critical_compute(r)
        preds = []
        for compute in (cm.compute(words), own):
            comm = _comm_time(s, w, tensors, net, compute, backward_fraction, r["config"])
            step = compute + comm + cm.rest(s)
            preds.append(w * words / step)
        meas = r["words_per_s"]
        extra = {}
        if s == "horovod":  # the same without overlap: CPU-bound comm cannot hide behind compute
            step = own + _comm_time("ring", w, tensors, net, own, backward_fraction,
                                    r["config"]) + cm.rest(s)
            extra = {"predicted_own_compute_no_overlap_words_per_s": w * words / step,
                     "error_own_compute_no_overlap_pct": 100.0 * (w * words / step - meas) / meas}
        per_host = r["ranks"] / max(1, len(r.get("hosts") or [1]))
        threads = (r.get("threads") or {}).get("intra_op", 1) or 1
        rows.append({"strategy": s, "ranks": r["ranks"], "workers": w,
                     "measured_words_per_s": meas, "predicted_words_per_s": preds[0],
                     "error_pct": 100.0 * (preds[0] - meas) / meas,
                     "predicted_own_compute_words_per_s": preds[1],
                     "error_own_compute_pct": 100.0 * (preds[1] - meas) / meas,
                     "oversubscribed": per_host * threads > cores_on_host(),
                     "loadavg": r.get("loadavg"), **extra})
    return rows


# --- output -----------------------------------------------------------------------------------

def render(result: dict[str, Any]) -> str:
    """Markdown: the assumptions, efficiency per strategy and rank count, validation."""
    p = result["prediction"]
    lines = [f"# hvdscale predict: {result['config']}\n",
             f"- Model: {p['model_bytes'] / 2**20:.1f} MB of gradients in {p['tensors']} tensors "
             f"(largest {p['largest_tensor_bytes'] / 2**20:.1f} MB); fusion threshold "
             f"{p['fusion_threshold_bytes'] / 2**20:g} MB; PS dedicated servers: {p['servers']}",
             f"- Network: {result['network']['source']}: ring alpha "
             f"{result['network']['ring_alpha'] * 1e6:.2f} µs, overhead per allreduce "
             f"{result['network']['ring_overhead'] * 1e6:.1f} µs, bandwidth "
             f"{1e-9 / result['network']['ring_beta']:.2f} GB/s; PS alpha "
             f"{result['network']['ps_alpha'] * 1e6:.2f} µs, bandwidth "
             f"{1e-9 / result['network']['ps_beta']:.2f} GB/s; server update at "
             + (f"{result['network']['mem_bw'] / 1e9:.2f} GB/s" if result['network']['mem_bw']
                else "(not modelled)"),
             f"- Compute: {result['compute']['source']}; c0 = "
             f"{result['compute']['c0'] * 1e3:.2f} ms, c1 = {result['compute']['c1'] * 1e6:.3f} "
             f"µs/word; backward = {p['backward_fraction']:.2f} of compute", ""]
    for scaling, table in p["scaling"].items():
        ranks = [r for r in result["ranks"]]
        lines += [f"## {scaling} scaling: predicted efficiency (%) and step time (ms)", "",
                  "|Ranks|" + "|".join(f"{LABELS[s]} eff.|step" for s in table) + "|",
                  "|:--|" + ":--|" * (2 * len(table))]
        for i, n in enumerate(ranks):
            row = [str(n)]
            for s in table:
                q = table[s][i]
                row += ["", ""] if q is None else [f"{q.get('efficiency_pct', float('nan')):.1f}",
                                                   f"{q['step_s'] * 1e3:.1f}"]
            lines.append("|" + "|".join(row) + "|")
        lines.append("")
    if result.get("validation"):
        lines += ["## Validation: predicted vs measured words/s", "",
                  "|Strategy|Ranks|Workers|Measured|Predicted|Error (%)|Predicted with the "
                  "run's own compute (slowest rank per step)|Error (%)|Note|", "|:--|" + ":--|" * 8]
        for v in result["validation"]:
            lines.append(f"|{v['strategy']}|{v['ranks']}|{v['workers']}|"
                         f"{v['measured_words_per_s']:.0f}|{v['predicted_words_per_s']:.0f}|"
                         f"{v['error_pct']:+.1f}|{v['predicted_own_compute_words_per_s']:.0f}|"
                         f"{v['error_own_compute_pct']:+.1f}|"
                         f"{OVERSUBSCRIBED if v['oversubscribed'] else ''}|")
        lines.append("")
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> Path:
    """PNG: predicted efficiency vs ranks per strategy, one panel per scaling mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tables = result["prediction"]["scaling"]
    fig, axes = plt.subplots(1, len(tables), figsize=(5.5 * len(tables), 4.2), squeeze=False)
    for ax, (scaling, table) in zip(axes[0], tables.items(), strict=True):
        for s, rows in table.items():
            pts = [(r["ranks"], r["efficiency_pct"]) for r in rows
                   if r is not None and "efficiency_pct" in r]
            if pts:
                ax.semilogx(*zip(*pts, strict=True), "o-", ms=3, base=2, label=LABELS[s])
        ax.axhline(100, color="grey", lw=1, ls=":")
        ax.set(xlabel="ranks", ylabel="predicted efficiency (%)", ylim=(0, 105),
               title=f"{scaling} scaling")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"hvdscale predict: {result['config']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run_predict(config: str, sets: list[str], ranks: str, comm: str | None = None,
                latency: str | None = None, bandwidth: str | None = None,
                mem_bandwidth: str | None = None, records: str | None = None,
                words_per_s: float | None = None, compute_ms: float | None = None,
                scaling: str = "weak,strong", backward_fraction: float = 2 / 3,
                servers: int | None = None, transport: str = "",
                plot_path: str | None = None) -> dict[str, Any]:
    """Everything ``hvdscale predict`` does; returns the result (tables rendered by render).

    Raises:
        HvdscaleError: one clear message for bad or missing input.
    """
    cfg = load_config(config, sets)
    rank_list = parse_ranks(ranks)
    scalings = [s.strip() for s in scaling.split(",") if s.strip()]
    if not scalings or any(s not in ("weak", "strong") for s in scalings):
        raise HvdscaleError(f"--scaling must be weak, strong or weak,strong (got {scaling!r})")
    if not 0 <= backward_fraction <= 1:
        raise HvdscaleError(f"--backward-fraction must be in [0, 1] (got {backward_fraction})")
    if servers is not None and servers < 1:
        raise HvdscaleError(f"--servers must be >= 1 (got {servers})")
    if comm and (latency or bandwidth):
        raise HvdscaleError("give either --comm DIR or --latency and --bandwidth, not both")
    if comm:
        net = network_from_comm(comm, transport)
    elif latency and bandwidth:
        net = network_from_args(latency, bandwidth, mem_bandwidth)
    else:
        raise HvdscaleError("the network is missing: give --comm DIR (from hvdscale commbench) "
                            "or --latency and --bandwidth (e.g. --latency 5us --bandwidth 25Gbit)")
    tensors = gradient_bytes(cfg)
    recs = load_records(records, cfg) if records else []
    if words_per_s or compute_ms:
        if (words_per_s or 1) <= 0 or (compute_ms or 1) <= 0:
            raise HvdscaleError("--single-rate and --compute-ms must be positive")
        cm = compute_from_rate(cfg, words_per_s, compute_ms)
    elif recs:
        cm = compute_from_records(recs, net, tensors)
    else:
        raise HvdscaleError("the compute time is missing: give --records RESULTS (with a "
                            "1-rank run of this config), --single-rate WORDS_PER_S or "
                            "--compute-ms MS")
    pred = predict(cfg, rank_list, net, cm, scalings, backward_fraction, servers)
    result = {"kind": "predict", "config": str(config), "overrides": sets, "ranks": rank_list,
              "network": net.__dict__, "compute": {**cm.__dict__}, "prediction": pred,
              "validation": validate(recs, tensors, net, cm, backward_fraction) if recs else []}
    if plot_path:
        plot(result, Path(plot_path))
    return result


def dumps(result: dict[str, Any]) -> str:
    """The result as JSON (NaN-free: missing values are null)."""
    def clean(x: Any) -> Any:
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x

    return json.dumps(clean(result), indent=1)
