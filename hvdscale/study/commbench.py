"""``hvdscale commbench``: allreduce and parameter-server exchange times by message size.

The command launches itself: one ``mpirun`` job times mpi4py's ``Allreduce``, the parameter
server's push/pull (the real ``strategies.param_server.ParameterServer`` over stub buffers) and
then Horovod's allreduce with the MPI controller; one ``horovodrun --gloo`` job times Horovod
with the Gloo controller. Both jobs also time a memory copy (one rank alone, then all ranks at
once), the physical reference for what moving bytes costs on a host. The parent merges the two
jobs, fits ``time = a + b * bytes`` per transport and writes ``DIR/commbench.json``,
``DIR/commbench.md`` and ``DIR/commbench.png``.

Definitions (nccl-tests' for allreduce): a repeat's time is the slowest rank's; the size's time
is the median over repeats after warm-up; algbw = bytes / time; busbw = algbw * factor, with
factor = 2(n-1)/n for allreduce (the bytes each rank sends, over the message size). For the
parameter server the size is the model (each worker pushes all of it and pulls all of it back)
and factor = 2 * (the most bytes one rank sends or receives in one phase) / size: both are the
bandwidth one rank's link sustains, so the transports compare on one scale. Sizes use binary
units (1 KB = 1024 B).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from hvdscale.errors import HvdscaleError

TRANSPORTS = ("horovod-mpi", "horovod-gloo", "mpi4py", "ps")
MPI_TRANSPORTS = ("mpi4py", "ps", "horovod-mpi")  # in the order one mpirun job runs them
DEFAULT_SIZES = "4B..256MB"
SCHEMA = 1
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20,
          "MB": 1 << 20, "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}
BREAK_RESIDUAL = 0.25
"""A size whose time is off a transport's single line by more than this (relative) is one the
line does not describe."""


# --- sizes and definitions --------------------------------------------------------------------

def parse_size(text: str) -> int:
    """``"4B"``, ``"64KB"``, ``"256MB"``, ``"1048576"`` -> bytes (binary units).

    Raises:
        HvdscaleError: not a size, not positive, or not a whole number of float32 elements.
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).upper() not in _UNITS:
        raise HvdscaleError(f"--sizes: {text!r} is not a size (e.g. 4B, 64KB, 256MB)")
    n = float(m.group(1)) * _UNITS[m.group(2).upper()]
    if n < 4 or n != int(n) or int(n) % 4:
        raise HvdscaleError(f"--sizes: {text!r} must be a positive multiple of 4 bytes "
                            "(whole float32 elements)")
    return int(n)


def parse_sizes(text: str) -> list[int]:
    """``"4B..256MB"`` (doubling; ``"4B..256MB:x4"`` to multiply by 4) or ``"1MB,16MB"``."""
    text = str(text).strip()
    if ".." in text:
        rng, _, step = text.partition(":")
        lo_s, _, hi_s = rng.partition("..")
        lo, hi = parse_size(lo_s), parse_size(hi_s)
        factor = 2
        if step:
            if not re.fullmatch(r"x?\d+", step) or int(step.lstrip("x")) < 2:
                raise HvdscaleError(f"--sizes: step {step!r} must be xN with N >= 2")
            factor = int(step.lstrip("x"))
        if hi < lo:
            raise HvdscaleError(f"--sizes: {text!r} ends below its start")
        out, s = [], lo
        while s <= hi:
            out.append(s)
            s *= factor
        return out
    items = [t for t in text.split(",") if t.strip()]
    if not items:
        raise HvdscaleError("--sizes needs a range like 4B..256MB or a list like 1MB,16MB")
    return sorted({parse_size(t) for t in items})


def parse_transports(text: str) -> list[str]:
    """``"mpi4py,ps"`` -> known transport names, in the given order."""
    out: list[str] = []
    for t in (s.strip() for s in str(text).split(",")):
        if t not in TRANSPORTS:
            raise HvdscaleError(f"--transports: unknown transport {t!r}; choose from "
                                f"{', '.join(TRANSPORTS)}")
        if t not in out:
            out.append(t)
    return out


def human(nbytes: float) -> str:
    """Bytes as the shortest binary unit: 4 B, 64 KB, 256 MB."""
    for unit, div in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if nbytes >= div:
            v = nbytes / div
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.3g} {unit}"
    return f"{nbytes:.0f} B"


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


def repeats_for(size: int, repeats: int, min_repeats: int = 5) -> int:
    """Fewer repeats for big messages (their time is steady and long): <= 4 MB get all."""
    return max(min(repeats, min_repeats), min(repeats, int(repeats * (4 << 20) / size)))


# --- inside the ranks ---------------------------------------------------------------------------

def _timed(op: Callable[[], Any], barrier: Callable[[], None], reps: int,
           warmup: int) -> list[float]:
    for _ in range(warmup):
        barrier()
        op()
    out = []
    for _ in range(reps):
        barrier()  # every rank starts each repeat together
        t = time.perf_counter()
        op()
        out.append(time.perf_counter() - t)
    return out


def memcpy_bandwidth(world: Any, nbytes: int = 64 << 20, reps: int = 10) -> dict[str, float]:
    """Memory-copy bandwidth (bytes copied per second; each byte read once, written once):
    rank 0 alone while the others wait, then every rank at once (median per rank, then the
    median of those)."""
    src = np.ones(nbytes // 8)
    dst = np.empty_like(src)
    np.copyto(dst, src)

    def alone() -> None:
        if world.rank == 0:
            np.copyto(dst, src)

    t_alone = _timed(alone, world.barrier, reps, 1)
    t_all = _timed(lambda: np.copyto(dst, src), world.barrier, reps, 1)
    every = world.allgather(float(np.median(t_all)))
    return {"bytes": nbytes, "alone_GBps": nbytes / float(np.median(t_alone)) / 1e9,
            "concurrent_GBps": nbytes / float(np.median(every)) / 1e9,
            "concurrent_per_rank_GBps": [nbytes / t / 1e9 for t in every]}


class _StubAdapter:
    """Flat buffers of a given size standing in for a model: what ``ParameterServer`` moves."""

    framework = "none"
    compute_s = 0.0

    def __init__(self, elements: int) -> None:
        self.num_params = elements
        self.p = np.ones(elements, dtype=np.float32)
        self.g = np.ones(elements, dtype=np.float32)

    def params_buffer(self) -> np.ndarray:
        return self.p

    def grads_buffer(self) -> np.ndarray:
        return self.g

    def params_changed(self) -> None:
        pass

    def zero_grad(self) -> None:
        pass  # the bytes moved are what is timed, not their values

    def shard_optimizer(self, shard: np.ndarray) -> Any:
        class _NoUpdate:
            grad = np.zeros_like(shard)

            def step(self) -> None:
                pass

        return _NoUpdate()


def _gather_times(world: Any, times: list[float]) -> list[float]:
    """Per repeat, the slowest rank's time."""
    return [float(x) for x in np.max(np.array(world.allgather(times)), axis=0)]


def _bench_mpi4py(world: Any, sizes: list[int], repeats: int, warmup: int) -> list[dict]:
    from mpi4py import MPI

    out = []
    for size in sizes:
        send = np.ones(size // 4, dtype=np.float32)
        recv = np.empty_like(send)
        t = _timed(lambda s=send, r=recv: world.comm.Allreduce(s, r, op=MPI.SUM),
                   world.barrier, repeats_for(size, repeats), warmup)
        out.append({"bytes": size, "times_s": _gather_times(world, t)})
    return out


def _bench_ps(world: Any, sizes: list[int], repeats: int, warmup: int, servers: int,
              placement: str) -> list[dict]:
    from hvdscale.config import PSConfig
    from hvdscale.strategies.param_server import ParameterServer

    out = []
    for size in sizes:
        ps = ParameterServer(PSConfig(num_servers=servers, placement=placement), world)
        ps.setup(_StubAdapter(size // 4))  # type: ignore[arg-type]
        # step(None): every worker pushes its gradient shards and a token count, servers
        # receive them all and send their shards back (no update with zero tokens).
        t = _timed(lambda p=ps: p.step(None), world.barrier, repeats_for(size, repeats), warmup)
        out.append({"bytes": size, "times_s": _gather_times(world, t)})
        del ps
    return out


def _bench_horovod(world: Any, sizes: list[int], repeats: int, warmup: int) -> list[dict]:
    import horovod.torch as hvd  # hvd:
    import torch

    out = []
    for size in sizes:
        buf = torch.from_numpy(np.ones(size // 4, dtype=np.float32))
        name = f"commbench.{size}"
        t = _timed(lambda b=buf, nm=name: hvd.allreduce_(b, op=hvd.Sum, name=nm),  # hvd:
                   world.barrier, repeats_for(size, repeats), warmup)
        out.append({"bytes": size, "times_s": _gather_times(world, t)})
    return out


def rank_main(argv: Sequence[str]) -> int:
    """One rank of a commbench job (started by ``run_commbench``); rank 0 writes the result."""
    ap = argparse.ArgumentParser(prog="python -m hvdscale.study.commbench")
    ap.add_argument("--transports", required=True)
    ap.add_argument("--sizes", required=True)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--ps-servers", type=int, default=1)
    ap.add_argument("--ps-placement", default="colocated")
    ap.add_argument("--result", required=True)
    args = ap.parse_args(argv)

    from hvdscale.core.supervise import report_and_abort
    from hvdscale.core.threads import launch_local_size, thread_env
    from hvdscale.core.world import (
        HorovodWorld,
        MPIWorld,
        init_horovod,
        is_gloo_launch,
        launch_rank,
    )

    rank = launch_rank()
    try:
        # The runs' own settings: one compute thread, OpenMPI yielding when cores are short.
        for k, v in thread_env(1, "auto", launch_local_size()).items():
            os.environ.setdefault(k, v)
        transports = args.transports.split(",")
        sizes = [int(s) for s in args.sizes.split(",")]
        started = datetime.now(UTC).isoformat(timespec="seconds")
        res: dict[str, Any] = {"transports": {}}
        if is_gloo_launch():
            init_horovod({}, "torch")
            world: Any = HorovodWorld("torch")
            res["memcpy_before"] = memcpy_bandwidth(world)
            res["transports"]["horovod-gloo"] = _bench_horovod(world, sizes, args.repeats,
                                                               args.warmup)
        else:
            world = MPIWorld()
            res["memcpy_before"] = memcpy_bandwidth(world)
            if "mpi4py" in transports:
                res["transports"]["mpi4py"] = _bench_mpi4py(world, sizes, args.repeats,
                                                            args.warmup)
            if "ps" in transports:
                res["transports"]["ps"] = _bench_ps(world, sizes, args.repeats, args.warmup,
                                                    args.ps_servers, args.ps_placement)
            if "horovod-mpi" in transports:
                # Horovod starts last: its background thread would compete with the others.
                init_horovod({}, "torch")
                res["transports"]["horovod-mpi"] = _bench_horovod(world, sizes, args.repeats,
                                                                  args.warmup)
        res["memcpy_after"] = memcpy_bandwidth(world)
        res.update(ranks=world.size, started=started, loadavg=list(os.getloadavg()),
                   backend=world.backend,
                   mpi_yield_when_idle=os.environ.get("OMPI_MCA_mpi_yield_when_idle"),
                   horovod_env={k: v for k, v in os.environ.items()
                                if k.startswith("HOROVOD_") and "RENDEZVOUS" not in k
                                and "GLOO" not in k and "HOSTNAME" not in k})
        world.barrier()
        if world.rank == 0:
            Path(args.result).write_text(json.dumps(res))
        return 0
    except BaseException as e:
        report_and_abort(e, rank)
        return 1


# --- fitting --------------------------------------------------------------------------------

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


LATENCY_MAX_BYTES = 64 << 10
BANDWIDTH_MIN_BYTES = 1 << 20


def link_parameters(transport: str, fit: dict[str, Any], n: int, ps_servers: int,
                    ps_placement: str, sizes: Sequence[int] = (),
                    times: Sequence[float] = ()) -> dict[str, Any]:
    """Per-link latency and seconds per byte from a transport's fit, through its textbook cost:
    ring allreduce 2(n-1) alpha + 2(n-1)/n bytes beta; parameter server 2 (m alpha + f bytes
    beta) with m messages and a share f of the model through its busiest rank per phase.

    With the measured ``sizes`` and ``times``, and at least two sizes in each regime, alpha comes
    from a line through the sizes up to 64 KB (the latency regime) and beta from a line through
    the sizes from 1 MB (the bandwidth regime): one line over the whole range bends to fit both
    and misstates each where a protocol or buffer switch lies between them.
    """
    if fit.get("b_s_per_byte") is None:
        return {"alpha_s": None, "beta_s_per_byte": None}
    if transport == "ps":
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


# --- the parent: launch, merge, write ----------------------------------------------------------

def summarize_points(raw: list[dict], factor: float) -> list[dict]:
    """Median time, algbw and busbw per size from the per-repeat (slowest-rank) times."""
    out = []
    for p in raw:
        t = float(np.median(p["times_s"]))
        alg = p["bytes"] / t / 1e9
        out.append({"bytes": p["bytes"], "time_s": t, "repeats": len(p["times_s"]),
                    "times_s": p["times_s"], "algbw_GBps": alg, "busbw_GBps": alg * factor})
    return out


def _launch(kind: str, n: int, transports: list[str], sizes: list[int], args: dict[str, Any],
            out: Path, hostfile_path: Path | None) -> dict:
    from hvdscale.study.sweep import error_summary, launch_env, launcher_prefix, run_launch

    gloo = kind == "gloo"
    prefix = launcher_prefix("horovodrun" if gloo else "mpirun", n, hostfile_path, gloo=gloo)
    if not gloo and hostfile_path is None and n > _cores():
        prefix.insert(3, "--oversubscribe")
    result = out / f".commbench_{kind}.json"
    result.unlink(missing_ok=True)
    cmd = [*prefix, sys.executable, "-m", "hvdscale.study.commbench",
           "--transports", ",".join(transports), "--sizes", ",".join(map(str, sizes)),
           "--repeats", str(args["repeats"]), "--warmup", str(args["warmup"]),
           "--ps-servers", str(args["ps_servers"]), "--ps-placement", args["ps_placement"],
           "--result", str(result)]
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    err = logs / f"commbench_{kind}.stderr"
    rc, timed_out = run_launch(cmd, launch_env(), args["timeout_s"],
                               logs / f"commbench_{kind}.stdout", err)
    if timed_out:
        raise HvdscaleError(f"commbench ({kind} job) timed out after {args['timeout_s']:g} s; "
                            f"log: {err}")
    if rc != 0 or not result.exists():
        raise HvdscaleError(f"commbench ({kind} job) failed, exit {rc}: "
                            f"{error_summary(err.read_text(errors='replace'))} (log: {err})")
    data = json.loads(result.read_text())
    result.unlink()
    data["command"] = cmd
    return data


def _cores() -> int:
    from hvdscale.core.threads import cores_on_host

    return cores_on_host()


def run_commbench(np_ranks: int, sizes: str | list[int] = DEFAULT_SIZES,
                  transports: str | list[str] = ",".join(TRANSPORTS),  # noqa: B008
                  out: str | Path = ".",
                  repeats: int = 20, warmup: int = 2, ps_servers: int = 1,
                  ps_placement: str = "colocated", hostfile: str | Path | None = None,
                  timeout_s: float = 600.0, plot: bool = True) -> dict[str, Any]:
    """Launch the jobs, merge, fit, write DIR/commbench.{json,md,png}; return the result.

    Raises:
        HvdscaleError: bad arguments (nothing launched) or a failed job (with its error).
    """
    from hvdscale.records.provenance import git_revision, versions
    from hvdscale.records.store import check_writable
    from hvdscale.study.hostfile import parse_hostfile, write_hostfile

    size_list = sizes if isinstance(sizes, list) else parse_sizes(sizes)
    names = transports if isinstance(transports, list) else parse_transports(transports)
    if np_ranks < 1:
        raise HvdscaleError(f"--np must be a positive number of ranks (got {np_ranks})")
    if repeats < 1 or warmup < 0:
        raise HvdscaleError(f"--repeats must be >= 1 and --warmup >= 0 (got {repeats}, {warmup})")
    if ps_placement not in ("colocated", "dedicated"):
        raise HvdscaleError(f"--ps-placement must be colocated or dedicated (got {ps_placement})")
    if "ps" in names and (ps_servers < 1 or ps_servers > np_ranks or
                          (ps_placement == "dedicated" and ps_servers >= np_ranks)):
        raise HvdscaleError(f"--ps-servers {ps_servers} does not fit {np_ranks} ranks "
                            f"({ps_placement}: 1..{np_ranks - (ps_placement == 'dedicated')})")
    if any(t.startswith("horovod") for t in names):
        import importlib.util

        if importlib.util.find_spec("horovod") is None:
            raise HvdscaleError("horovod is not installed: pick --transports mpi4py,ps or "
                                "install the stack (launch/install.sh)")
    hosts = parse_hostfile(hostfile) if hostfile else None
    if hosts is not None:
        hosts.check_ranks(np_ranks)
    out_dir = check_writable(out)
    args = {"repeats": repeats, "warmup": warmup, "ps_servers": ps_servers,
            "ps_placement": ps_placement, "timeout_s": timeout_s}
    load_before = list(os.getloadavg())
    jobs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="hvdscale-commbench-") as tmp:
        hf = write_hostfile(hosts, Path(tmp) / "hostfile") if hosts else None
        mpi_part = [t for t in MPI_TRANSPORTS if t in names]
        if mpi_part:
            jobs["mpirun"] = _launch("mpi", np_ranks, mpi_part, size_list, args, out_dir, hf)
        if "horovod-gloo" in names:
            jobs["horovodrun --gloo"] = _launch("gloo", np_ranks, ["horovod-gloo"], size_list,
                                                args, out_dir, hf)
    result = merge(jobs, np_ranks, size_list, names, ps_servers, ps_placement)
    result.update(loadavg_before=load_before, loadavg_after=list(os.getloadavg()),
                  versions=versions(), git=git_revision(),
                  oversubscribed=np_ranks > (hosts.slots if hosts else _cores()))
    write_outputs(result, out_dir, plot)
    return result


def merge(jobs: dict[str, dict], n: int, sizes: list[int], names: list[str], ps_servers: int,
          ps_placement: str) -> dict[str, Any]:
    """One result from the launched jobs: per transport its points, fit and link parameters."""
    transports: dict[str, Any] = {}
    memcpy = []
    for launcher, job in jobs.items():
        memcpy += [job["memcpy_before"], job["memcpy_after"]]
        for name, raw in job["transports"].items():
            if name == "ps":
                workers = n if ps_placement == "colocated" else n - ps_servers
                factor = ps_factor(workers, ps_servers, ps_placement)
                definition = (f"{ps_placement} parameter server, {ps_servers} server(s), "
                              f"{workers} worker(s): size = model bytes each worker pushes and "
                              f"pulls; busbw = algbw x {factor:g} (2 phases x the busiest "
                              "rank's share of the model per phase)")
            else:
                factor = allreduce_factor(n)
                definition = f"allreduce: busbw = algbw x 2(n-1)/n = algbw x {factor:g}"
            pts = summarize_points(raw, factor)
            fit = fit_alpha_beta([p["bytes"] for p in pts], [p["time_s"] for p in pts])
            transports[name] = {
                "launcher": launcher, "busbw_factor": factor, "definition": definition,
                "points": pts, "fit": fit,
                "link": link_parameters(name, fit, n, ps_servers, ps_placement,
                                        [p["bytes"] for p in pts], [p["time_s"] for p in pts])}
    ordered = {t: transports[t] for t in names if t in transports}
    conc = [m["concurrent_GBps"] for m in memcpy]
    alone = [m["alone_GBps"] for m in memcpy]
    first = next(iter(jobs.values()))
    return {
        "schema": SCHEMA, "kind": "commbench", "ranks": n, "sizes": sizes,
        "started": first["started"], "ps": {"servers": ps_servers, "placement": ps_placement},
        "memcpy": {"concurrent_GBps": float(np.median(conc)), "alone_GBps": float(np.median(alone)),
                   "measurements": memcpy,
                   "definition": "bytes copied per second by np.copyto of 64 MB (read once, "
                                 "written once); concurrent: every rank copying at once"},
        "jobs": {k: {"command": v["command"], "loadavg": v["loadavg"], "backend": v["backend"],
                     "mpi_yield_when_idle": v["mpi_yield_when_idle"],
                     "horovod_env": v["horovod_env"]} for k, v in jobs.items()},
        "transports": ordered,
    }


def table(result: dict[str, Any]) -> str:
    """Markdown: busbw per size and transport, the fits and where one line stops fitting."""
    names = list(result["transports"])
    lines = [f"# commbench: {result['ranks']} ranks\n",
             f"Memory copy (same run): {result['memcpy']['alone_GBps']:.2f} GB/s one rank alone, "
             f"{result['memcpy']['concurrent_GBps']:.2f} GB/s per rank with all copying.\n",
             "Time: median over repeats of the slowest rank's time (µs); busbw in GB/s.\n",
             "|Size|" + "|".join(f"{t} time (µs)|{t} busbw" for t in names) + "|",
             "|:--|" + ":--|" * (2 * len(names))]
    for i, size in enumerate(result["sizes"]):
        row = [human(size)]
        for t in names:
            p = result["transports"][t]["points"][i]
            row += [f"{p['time_s'] * 1e6:.1f}", f"{p['busbw_GBps']:.3f}"]
        lines.append("|" + "|".join(row) + "|")
    lines += ["", "## Fits: time = a + b x bytes (weighted by 1/time), per-link alpha and beta",
              "", "|Transport|a (µs)|1/b (GB/s)|link alpha (µs)|link bandwidth (GB/s)|"
              "rms rel. residual|sizes off the line (>25%)|two lines fit better above|", "|:--|"
              + ":--|" * 7]
    for t in names:
        tr = result["transports"][t]
        f, ln = tr["fit"], tr["link"]
        if f.get("b_s_per_byte") is None:
            continue
        brk = f["break"]
        lines.append(
            f"|{t}|{f['a_s'] * 1e6:.1f} ± {f['a_se_s'] * 1e6:.1f}|"
            f"{_gbps(f['b_s_per_byte'])}|"
            f"{_fmt_us(ln.get('alpha_s'))}|{_gbps(ln.get('beta_s_per_byte'))}|"
            f"{f['rms_rel_residual']:.2f}|{', '.join(human(s) for s in f['off_line']) or 'none'}|"
            f"{human(brk['below_bytes']) + ' → ' + human(brk['above_bytes']) if brk else 'no'}|")
    lines.append("")
    for t in names:
        lines.append(f"- {t}: {result['transports'][t]['definition']}")
    return "\n".join(lines) + "\n"


def _gbps(b: float | None) -> str:
    return "" if not b or b <= 0 else f"{1e-9 / b:.2f}"


def _fmt_us(s: float | None) -> str:
    return "" if s is None else f"{s * 1e6:.2f}"


def plot(result: dict[str, Any], path: Path) -> Path:
    """PNG: time vs size with each fit (left), busbw vs size with the memcpy line (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for t, tr in result["transports"].items():
        x = np.array([p["bytes"] for p in tr["points"]], float)
        line, = ax1.loglog(x, [p["time_s"] for p in tr["points"]], "o", ms=3, label=t)
        f = tr["fit"]
        if f.get("b_s_per_byte") is not None:
            ax1.loglog(x, np.maximum(f["a_s"] + f["b_s_per_byte"] * x, 1e-9), "-", lw=1,
                       color=line.get_color(), alpha=0.6)
        ax2.semilogx(x, [p["busbw_GBps"] for p in tr["points"]], "o-", ms=3, label=t,
                     color=line.get_color())
    ax2.axhline(result["memcpy"]["concurrent_GBps"], color="grey", ls=":",
                label="memcpy, all ranks")
    ax2.axhline(result["memcpy"]["alone_GBps"], color="black", ls=":", label="memcpy, one rank")
    ax1.set(xlabel="message size (bytes)", ylabel="time (s)", title="Time (lines: a + b x bytes)")
    ax2.set(xlabel="message size (bytes)", ylabel="bus bandwidth (GB/s)", title="busbw")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"hvdscale commbench, {result['ranks']} ranks", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_outputs(result: dict[str, Any], out: Path, with_plot: bool = True) -> None:
    """DIR/commbench.json, commbench.md and (with_plot) commbench.png."""
    (out / "commbench.json").write_text(json.dumps(result, indent=1))
    (out / "commbench.md").write_text(table(result))
    if with_plot:
        plot(result, out / "commbench.png")


def load_commbench(path: str | Path) -> dict[str, Any]:
    """A commbench result from DIR or DIR/commbench.json, checked enough to predict from.

    Raises:
        HvdscaleError: missing, not JSON, or without a transport's fit.
    """
    p = Path(path)
    f = p / "commbench.json" if p.is_dir() else p
    if not f.exists():
        raise HvdscaleError(f"no commbench result at {f} (run `hvdscale commbench --np N "
                            f"--out {p}` first)")
    try:
        data = json.loads(f.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise HvdscaleError(f"{f} is not a commbench result: not JSON ({e})") from None
    if not isinstance(data, dict) or data.get("kind") != "commbench" or \
            not isinstance(data.get("transports"), dict) or not isinstance(data.get("ranks"), int):
        raise HvdscaleError(f"{f} is not a commbench result (no kind/ranks/transports)")
    try:
        for tr in data["transports"].values():
            pts = tr["points"]
            assert len(pts) >= 2 and all(p["bytes"] > 0 and p["time_s"] > 0 for p in pts)
        refit(data)
    except (AssertionError, KeyError, TypeError, ValueError, np.linalg.LinAlgError):
        raise HvdscaleError(f"{f}: a transport without at least two measured sizes (bytes, "
                            "time_s): a damaged or too small commbench result") from None
    for name, tr in data["transports"].items():
        link = tr["link"]
        if not all(isinstance(link.get(k), int | float) and math.isfinite(link[k])
                   for k in ("alpha_s", "beta_s_per_byte")):
            raise HvdscaleError(f"{f}: transport {name!r} has no link alpha/beta (measured at "
                                f"{data['ranks']} rank(s)?)")
    return data


if __name__ == "__main__":
    sys.exit(rank_main(sys.argv[1:]))
