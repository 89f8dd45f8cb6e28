"""The parent side of ``hvdscale commbench``: check the request, launch the jobs, merge them.

The command launches itself: one ``mpirun`` job times mpi4py's ``Allreduce``, the parameter
server's push/pull (the real ``strategies.param_server.ParameterServer`` over stub buffers) and
then Horovod's allreduce with the MPI controller; one ``horovodrun --gloo`` job times Horovod
with the Gloo controller. Both jobs also time a memory copy (one rank alone, then all ranks at
once), the physical reference for what moving bytes costs on a host. The parent merges the two
jobs, fits ``time = a + b * bytes`` per transport and writes ``DIR/commbench.json``,
``DIR/commbench.md`` and ``DIR/commbench.png``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hvdscale.errors import HvdscaleError
from hvdscale.records.migrate import SCHEMA_VERSION
from hvdscale.study.commbench.model import (
    allreduce_factor,
    fit_alpha_beta,
    link_parameters,
    ps_factor,
    summarize_points,
)
from hvdscale.study.commbench.output import write_outputs
from hvdscale.study.commbench.sizes import (
    DEFAULT_SIZES,
    DEFAULT_TRANSPORTS,
    MPI_TRANSPORTS,
    parse_sizes,
    parse_transports,
)


@dataclass(frozen=True)
class CommbenchSpec:
    """What one ``hvdscale commbench`` measures: sizes and transports as the options give them
    (text) or already parsed (lists), the repeats, the parameter server's layout, and the time
    limit of each launched job, and the NIC(s) the ranks talk over (None: the launcher's
    choice)."""

    np_ranks: int
    sizes: str | list[int] = DEFAULT_SIZES
    transports: str | list[str] = DEFAULT_TRANSPORTS
    repeats: int = 20
    warmup: int = 2
    ps_servers: int = 1
    ps_placement: str = "colocated"
    timeout_s: float = 600.0
    network_interfaces: str | None = None


def _checked(spec: CommbenchSpec) -> tuple[list[int], list[str]]:
    """The sizes and transport names of ``spec``, after checking every option.

    Raises:
        HvdscaleError: a bad option, or Horovod asked for and not installed.
    """
    size_list = spec.sizes if isinstance(spec.sizes, list) else parse_sizes(spec.sizes)
    names = (spec.transports if isinstance(spec.transports, list)
             else parse_transports(spec.transports))
    n, k, placement = spec.np_ranks, spec.ps_servers, spec.ps_placement
    if n < 1:
        raise HvdscaleError(f"--np must be a positive number of ranks (got {n})")
    if spec.repeats < 1 or spec.warmup < 0:
        raise HvdscaleError(f"--repeats must be >= 1 and --warmup >= 0 (got {spec.repeats}, "
                            f"{spec.warmup})")
    if placement not in ("colocated", "dedicated"):
        raise HvdscaleError(f"--ps-placement must be colocated or dedicated (got {placement})")
    if "p2p" in names and n < 2:
        raise HvdscaleError(f"--transports p2p needs --np 2 or more (got {n})")
    if "ps" in names and (k < 1 or k > n or (placement == "dedicated" and k >= n)):
        raise HvdscaleError(f"--ps-servers {k} does not fit {n} ranks "
                            f"({placement}: 1..{n - (placement == 'dedicated')})")
    if any(t.startswith("horovod") for t in names):
        import importlib.util

        if importlib.util.find_spec("horovod") is None:
            raise HvdscaleError("horovod is not installed: pick --transports mpi4py,ps or "
                                "install the stack (launch/install.sh)")
    return size_list, names


def _launch(kind: str, spec: CommbenchSpec, transports: list[str], sizes: list[int], out: Path,
            hostfile_path: Path | None) -> dict:
    from hvdscale.study.sweep import process
    from hvdscale.study.sweep.launcher import error_summary, launch_env, launcher_prefix

    gloo = kind == "gloo"
    n = spec.np_ranks
    prefix = launcher_prefix("horovodrun" if gloo else "mpirun", n, hostfile_path,
                             network_interfaces=spec.network_interfaces, gloo=gloo)
    if not gloo and hostfile_path is None and n > _cores():
        prefix.insert(3, "--oversubscribe")
    result = out / f".commbench_{kind}.json"
    result.unlink(missing_ok=True)
    cmd = [*prefix, sys.executable, "-m", "hvdscale.study.commbench",
           "--transports", ",".join(transports), "--sizes", ",".join(map(str, sizes)),
           "--repeats", str(spec.repeats), "--warmup", str(spec.warmup),
           "--ps-servers", str(spec.ps_servers), "--ps-placement", spec.ps_placement,
           "--result", str(result)]
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    err = logs / f"commbench_{kind}.stderr"
    ended = process.start(cmd, launch_env(), (logs / f"commbench_{kind}.stdout", err),
                          spec.timeout_s)
    rc = ended.rc
    if ended.timed_out:
        raise HvdscaleError(f"commbench ({kind} job) {ended.why}; log: {err}")
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


def run_commbench(spec: CommbenchSpec, out: str | Path = ".", hostfile: str | Path | None = None,
                  plot: bool = True) -> dict[str, Any]:
    """Launch the jobs, merge, fit, write DIR/commbench.{json,md,png}; return the result.

    Raises:
        HvdscaleError: bad arguments (nothing launched) or a failed job (with its error).
    """
    from hvdscale.records.provenance import git_revision, versions
    from hvdscale.records.store import check_writable
    from hvdscale.study.sweep.hostfile import parse_hostfile, write_hostfile

    size_list, names = _checked(spec)
    hosts = parse_hostfile(hostfile) if hostfile else None
    if hosts is not None:
        hosts.check_ranks(spec.np_ranks)
    out_dir = check_writable(out)
    load_before = list(os.getloadavg())
    jobs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="hvdscale-commbench-") as tmp:
        hf = write_hostfile(hosts, Path(tmp) / "hostfile") if hosts else None
        mpi_part = [t for t in MPI_TRANSPORTS if t in names]
        if mpi_part:
            jobs["mpirun"] = _launch("mpi", spec, mpi_part, size_list, out_dir, hf)
        if "horovod-gloo" in names:
            jobs["horovodrun --gloo"] = _launch("gloo", spec, ["horovod-gloo"], size_list,
                                                out_dir, hf)
    result = merge(jobs, spec.np_ranks, size_list, names, spec.ps_servers, spec.ps_placement)
    result.update(loadavg_before=load_before, loadavg_after=list(os.getloadavg()),
                  versions=versions(), git=git_revision(),
                  oversubscribed=spec.np_ranks > (hosts.slots if hosts else _cores()))
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
            if name == "p2p":
                factor = 2.0
                definition = ("ping-pong between ranks 0 and 1: size = bytes each way; busbw = "
                              "algbw x 2 (the size crosses the link twice, one way at a time)")
            elif name == "ps":
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
        "schema": SCHEMA_VERSION, "kind": "commbench", "ranks": n, "sizes": sizes,
        "started": first["started"], "ps": {"servers": ps_servers, "placement": ps_placement},
        "memcpy": {"concurrent_GBps": float(np.median(conc)), "alone_GBps": float(np.median(alone)),
                   "measurements": memcpy,
                   "definition": "bytes copied per second by np.copyto of 64 MB (read once, "
                                 "written once); concurrent: every rank copying at once"},
        "jobs": {k: {"command": v["command"], "loadavg": v["loadavg"], "backend": v["backend"],
                     "mpi_yield_when_idle": v["mpi_yield_when_idle"],
                     "per_rank": v.get("per_rank"),
                     "horovod_env": v["horovod_env"]} for k, v in jobs.items()},
        "transports": ordered,
    }
