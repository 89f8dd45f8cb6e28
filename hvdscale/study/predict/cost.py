"""predict's communication costs per step (alpha: latency per message, beta: seconds per byte of
one rank's link):

- ring allreduce of B bytes over n ranks: o + 2(n-1) alpha + 2(n-1)/n B beta, with o a fixed
  per-operation overhead (Horovod's coordination cycle, measured by commbench as Horovod's
  latency above mpi4py's; 0 with --latency/--bandwidth). Gradients are fused in backward order
  into buckets up to the fusion threshold. Without overlap the buckets run after backward; with
  overlap a tensor's gradient is ready when backward has reached it (backward time spread over
  the tensors by their bytes) and a bucket starts when the link is free, taking every ready
  tensor up to the threshold.
- Horovod's ``embedding_grads=gathered``: each embedding gradient is its own allgather (not
  fused) of P bytes per rank: o + (n-1) alpha + (n-1) P beta (a rank receives every other
  rank's rows).
- parameter server (push, then pull; no overlap, as strategies/param_server.py): 2 m alpha +
  f (push + pull) beta + a server update of (W + 2) dense shard bytes at the memory bandwidth,
  with m messages and a share f of the bytes through the busiest rank per phase
  (``commbench.ps_phase``): k dedicated servers beside n workers, or every rank serving 1/n
  (colocated, sharded). Push and pull are the model M each, or, with sparse embeddings, what
  ``study.sparse_bytes.ps_bytes`` counts (the update stays dense over the shard).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hvdscale.config.run import RunConfig
from hvdscale.study.commbench.model import ps_phase
from hvdscale.study.predict.inputs import Network

HOROVOD_DEFAULT_FUSION_MB = 128.0


@dataclass(frozen=True)
class CommSetup:
    """How one step's gradients travel besides the network: Horovod's fusion threshold (bytes)
    and the parameter servers (how many, and placed how: ``ps-sharded`` serves on every rank,
    ``ps-dedicated`` ignores the placement)."""

    threshold: float
    servers: int = 1
    placement: str = "colocated"
    gathered: tuple[int, ...] = ()
    """Per tensor (parameter order), one rank's allgather bytes under Horovod's gathered
    embeddings (0: allreduced); empty: everything allreduced."""
    push_bytes: float | None = None
    """A worker's push per step to the parameter servers (None: the dense model)."""
    pull_bytes: float | None = None
    """A worker's pull per step (None: the dense model)."""
    overlap: bool = True
    """Gradients reduced during backward (Horovod's ``hooks``, DDP); False: Horovod's
    ``after-backward``, one reduction of the whole flat buffer after backward."""

    @classmethod
    def of_record(cls, config: RunConfig) -> CommSetup:
        """A recorded run's own setup, from its record's ``config``."""
        strategy = config.strategy
        mb = strategy.horovod.fusion_threshold_mb or HOROVOD_DEFAULT_FUSION_MB
        overlap = strategy.horovod.overlap != "after-backward"
        if strategy.name == "ddp":  # DDP's buckets play the fusion buffer's part
            mb, overlap = strategy.ddp.bucket_cap_mb, True
        elif not overlap:  # one allreduce of the flat buffer, whatever the threshold
            mb = float("inf")
        return cls(mb * 1024 * 1024, strategy.ps.num_servers, strategy.ps.placement,
                   overlap=overlap)


def ring_cost(nbytes: float, n: int, net: Network) -> float:
    """One ring allreduce of ``nbytes`` over ``n`` ranks."""
    if n <= 1:
        return 0.0
    return net.ring_overhead + 2 * (n - 1) * net.ring_alpha + 2 * (n - 1) / n * nbytes * \
        net.ring_beta


def allgather_cost(nbytes: float, n: int, net: Network) -> float:
    """One ring allgather of ``nbytes`` from each of ``n`` ranks (each receives the others')."""
    if n <= 1:
        return 0.0
    return net.ring_overhead + (n - 1) * net.ring_alpha + (n - 1) * nbytes * net.ring_beta


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
                 backward_fraction: float, overlap: bool,
                 gathered: tuple[int, ...] = ()) -> float:
    """Communication time not hidden behind backward, for the gradients of one step; a tensor
    with ``gathered`` bytes travels as its own allgather of them instead of in a fused
    allreduce."""
    gat = list(reversed(gathered)) if gathered else [0] * len(tensors)
    back = list(reversed(tensors))  # gradients appear in reverse order of the parameters
    if not overlap:
        dense = [b for b, g in zip(back, gat, strict=True) if not g]
        return sum(ring_cost(b, n, net) for b in fuse(dense, threshold)) + \
            sum(allgather_cost(g, n, net) for g in gat if g)
    total = float(sum(back))
    fwd = compute * (1 - backward_fraction)
    bwd = compute * backward_fraction
    ready = fwd + bwd * np.cumsum(back) / total  # backward's progress: the dense sizes
    free, i = 0.0, 0
    while i < len(back):
        start = max(free, ready[i])
        if gat[i]:
            free, i = start + allgather_cost(gat[i], n, net), i + 1
            continue
        j, size = i, 0
        while j < len(back) and not gat[j] and ready[j] <= start + 1e-15 and (
                size == 0 or size + back[j] <= threshold):
            size += back[j]
            j += 1
        free = start + ring_cost(size, n, net)
        i = j
    return max(0.0, free - compute)


def ps_time(model_bytes: float, workers: int, servers: int, placement: str, net: Network,
            push_bytes: float | None = None, pull_bytes: float | None = None) -> float:
    """Push + pull through the busiest rank (the dense model each, unless given), plus the
    servers' update of their (dense) shard."""
    msgs, frac = ps_phase(workers, servers, placement)
    push = model_bytes if push_bytes is None else push_bytes
    pull = model_bytes if pull_bytes is None else pull_bytes
    t = 2 * msgs * net.ps_alpha + frac * (push + pull) * net.ps_beta
    if net.mem_bw:
        t += (workers + 2) * model_bytes / servers / net.mem_bw
    return t


def comm_time(strategy: str, n: int, tensors: list[int], net: Network, compute: float,
              backward_fraction: float, setup: CommSetup) -> float:
    """Exposed communication per step of ``strategy`` with ``n`` workers: a predicted strategy
    (``STRATEGIES``) or a recorded one (``horovod`` and ``ddp`` with the fusion and overlap
    ``setup`` gives, ``ps`` as ``setup`` places it, ``independent``)."""
    model = float(sum(tensors))
    if strategy in ("ring", "ring-overlap"):
        return ring_exposed(tensors, n, net, setup.threshold, compute, backward_fraction,
                            strategy != "ring", setup.gathered)
    if strategy in ("horovod", "ddp"):  # as recorded: its own fusion (buckets) and overlap
        return ring_exposed(tensors, n, net, setup.threshold, compute, backward_fraction,
                            setup.overlap, setup.gathered)
    ps = (setup.push_bytes, setup.pull_bytes)
    if strategy == "ps-dedicated":
        return ps_time(model, n, setup.servers, "dedicated", net, *ps)
    if strategy == "ps-sharded":
        return ps_time(model, n, n, "colocated", net, *ps)
    if strategy == "ps":  # as recorded: the record's own placement and servers
        return ps_time(model, n, setup.servers, setup.placement, net, *ps)
    return 0.0  # independent
