"""TF_CONFIG for ``MultiWorkerMirroredStrategy``, built from the launcher's ranks and hosts.

TensorFlow's collectives need every worker's gRPC address before the first one starts. The
launcher (mpirun, srun) already made the ranks, so each rank picks its own port on its own host
and the addresses are agreed over the harness's MPI world: nobody writes TF_CONFIG by hand.
A TF_CONFIG the user exported wins, after a check that it describes this job.

With several hosts, the addresses are each rank's own IP address on the job's network (the
interface the launcher or user names, as ``hvdscale.core.rendezvous`` picks it for PyTorch), so
the workers talk over that network and never over a bridge every host has. TensorFlow's gRPC
server itself listens on every interface (it has no bind-address setting): see
docs/security.md. A fixed ``strategy.mwms.port`` (N + local rank) is checked free on every
host before TensorFlow starts, so two jobs on one node get one clear error, not a server that
fails to start; port 0 lets the OS pick (closed again until TensorFlow binds it: a short
window in which another process could take it; TensorFlow binds it itself, without
SO_REUSEPORT, so it cannot be held open for it).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hvdscale.core import rendezvous
from hvdscale.errors import ConfigError

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A TCP port free on this host now (the OS picks it; released for TF's server to take)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def worker_addresses(hosts: list[str], ports: list[int],
                     ips: list[str] | None = None) -> list[str]:
    """``host:port`` of each rank; one host only: the loopback address (no name lookup);
    ``ips``: each rank's address on the job's network, used instead of its host name."""
    single = len(set(hosts)) == 1
    names = [LOOPBACK] * len(hosts) if single else (ips or hosts)
    return [f"{h}:{p}" for h, p in zip(names, ports, strict=True)]


def port_problem(port: int) -> str:
    """Why ``port`` cannot be this rank's gRPC port now ('' if it is free on this host)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC binds
            s.bind(("", port))
    except OSError as e:
        return (f"strategy.mwms.port: port {port} on {socket.gethostname()} cannot be bound "
                f"({e.strerror or e}; another job on this node?): choose another base port, "
                "or 0 to let each rank's OS pick one")
    return ""


def build_tf_config(addresses: list[str], rank: int) -> dict[str, Any]:
    """The TF_CONFIG of rank ``rank`` in a cluster of ``addresses`` (one worker per rank)."""
    return {"cluster": {"worker": list(addresses)}, "task": {"type": "worker", "index": rank}}


def check_user_tf_config(text: str, rank: int, size: int) -> dict[str, Any]:
    """Parse a user-exported TF_CONFIG; it must list ``size`` workers and make this rank
    worker ``rank`` (MWMS ranks are the launcher's ranks)."""
    try:
        conf = json.loads(text)
        workers = conf["cluster"]["worker"]
        task = conf["task"]
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"TF_CONFIG is not a cluster with workers and a task ({e})") from None
    if len(workers) != size or task.get("type") != "worker" or task.get("index") != rank:
        raise ConfigError(f"TF_CONFIG lists {len(workers)} workers and task {task} on rank "
                          f"{rank}; this launch has {size} ranks: each rank must be the worker "
                          "of its own index (or unset TF_CONFIG to have it built)")
    return conf


def agree_tf_config(world: Any, port: int) -> dict[str, Any]:
    """TF_CONFIG for this rank of ``world`` (an MPI world); see :func:`exported` to use it.

    Args:
        world: the harness world (``rank``, ``size``, ``local_rank``, ``allgather``).
        port: 0: every rank takes a free port on its host; N > 0: local rank r takes N + r.

    Every rank takes part in the gather, also when the user's TF_CONFIG wins, so no rank waits
    for another that skipped it.
    """
    own = free_port() if port == 0 else port + world.local_rank  # hvd: this worker's server
    mine = (socket.gethostname(), own, port_problem(own) if port else "",
            rendezvous.addresses(), rendezvous.named_interfaces(os.environ))
    everyone = world.allgather(mine)  # hvd: addresses agreed over MPI
    user = os.environ.get("TF_CONFIG", "")
    if user.strip():
        return check_user_tf_config(user, world.rank, world.size)
    problem = next((p for _, _, p, _, _ in everyone if p), "")
    if problem:  # the same first problem on every rank: all refuse alike, none waits
        raise ConfigError(problem)
    ips = rendezvous.job_addresses([(h, a, n) for h, _, _, a, n in everyone])
    return build_tf_config(worker_addresses([e[0] for e in everyone], [e[1] for e in everyone],
                                            ips), world.rank)


@contextmanager
def exported(conf: dict[str, Any]) -> Iterator[None]:
    """TF_CONFIG set to ``conf`` while MWMS's cluster resolver reads it (a user-exported value
    stays as it is); the environment is left as it was, so later subprocesses and a retry in
    this process do not inherit this job's cluster as if the user had set it."""
    before = os.environ.get("TF_CONFIG")
    if not (before or "").strip():
        os.environ["TF_CONFIG"] = json.dumps(conf)  # hvd: read by MWMS's cluster resolver
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TF_CONFIG", None)
        else:
            os.environ["TF_CONFIG"] = before
