"""The world of a ``torchrun`` launch: the harness's collectives over torch.distributed's gloo.

torchrun (alone, under ``srun``, or as a Kubernetes PyTorchJob's entry point) starts the ranks
with no MPI job behind them, often on a machine without MPI at all: its ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` and ``MASTER_ADDR``/``MASTER_PORT`` say
who each rank is and where the job's key-value store listens (the agent's own store with
``TORCHELASTIC_USE_AGENT_STORE``, else rank 0 binds it: ``env://``, as torch.distributed's own
``init_process_group`` does).

Each world talks on a gloo process group of its own, made directly (``ProcessGroupGloo``, not
registered as torch.distributed's default group): DDP makes the default group itself, on the
same store under another prefix, and the harness's sums and gathers never meet its buckets.
The store is joined once per process; each world (one per point of a launch) and each DDP
rendezvous uses a prefix of its own, numbered in the order every rank makes them.
"""

from __future__ import annotations

import os
import pickle
import socket
from datetime import timedelta
from typing import Any

import numpy as np

from hvdscale.core.world import World

TIMEOUT = timedelta(minutes=30)
"""gloo's limit on one collective; the harness's deadlines end a stuck job long before."""
_store: Any = None
_prefixes = 0


def _env_int(name: str, default: int | None = None) -> int:
    value = os.environ.get(name, "")
    if value.strip().isdigit():
        return int(value)
    if default is None:
        raise RuntimeError(f"torchrun launch without {name} in the environment")
    return default


def launcher_store(name: str) -> Any:
    """torchrun's key-value store (joined on first use) under a prefix of its own, ``name``
    and a number every rank counts alike (each caller of a kind gets a fresh key space)."""
    import torch.distributed as dist

    global _prefixes
    _prefixes += 1
    return dist.PrefixStore(f"hvdscale/{name}/{_prefixes}", _base_store())


def named_store(name: str) -> Any:
    """torchrun's store under the prefix ``name`` alone: for keys every rank names alike
    whatever it did before (a shared launch's agreement on point k, where a rank that failed
    early made fewer stores than the others, so ``launcher_store``'s count would differ)."""
    import torch.distributed as dist

    return dist.PrefixStore(f"hvdscale/{name}", _base_store())


def _base_store() -> Any:
    """torchrun's store, joined on first use."""
    import torch.distributed as dist

    global _store
    if _store is None:
        # env:// joins the agent's store (TORCHELASTIC_USE_AGENT_STORE) or binds it on rank 0.
        _store, _, _ = next(dist.rendezvous("env://", timeout=TIMEOUT))  # hvd:
    return _store


def single_host() -> bool:
    """Whether every rank of the launch is on this host (torchrun's local and world sizes)."""
    return _env_int("LOCAL_WORLD_SIZE", 0) == _env_int("WORLD_SIZE", 1)


def interface() -> str | None:
    """This host's interface toward torchrun's ``MASTER_ADDR`` for gloo (loopback when every
    rank is on this host; None: leave it to gloo, or a user-set ``GLOO_SOCKET_IFNAME`` wins)."""
    from hvdscale.core import rendezvous

    if single_host():
        return rendezvous.loopback_interface()
    try:
        addr = socket.gethostbyname(os.environ.get("MASTER_ADDR", "127.0.0.1"))
    except OSError:
        return None
    return rendezvous.interface_toward(addr)


class TorchWorld(World):
    """World over a gloo process group of its own on torchrun's store."""

    backend = "torchrun"

    def __init__(self) -> None:
        import torch.distributed as dist

        self.rank = _env_int("RANK")
        self.size = _env_int("WORLD_SIZE")
        self.local_rank = _env_int("LOCAL_RANK", 0)
        self.local_size = _env_int("LOCAL_WORLD_SIZE", self.size)
        self.ifname = interface()
        before = os.environ.get("GLOO_SOCKET_IFNAME")
        if self.ifname and before is None:
            os.environ["GLOO_SOCKET_IFNAME"] = self.ifname  # read as the group is made
        try:
            self.pg = dist.ProcessGroupGloo(launcher_store("world"), self.rank,  # hvd:
                                            self.size, TIMEOUT)
        finally:
            if before is None:
                os.environ.pop("GLOO_SOCKET_IFNAME", None)

    def rendezvous_store(self, name: str) -> Any:
        return launcher_store(name)

    def barrier(self) -> None:
        self.pg.barrier().wait()  # hvd:

    def allreduce_sum(self, values: np.ndarray) -> np.ndarray:
        import torch

        t = torch.from_numpy(np.array(values, dtype=np.float64))  # a copy: summed in place
        self.pg.allreduce([t]).wait()  # hvd: gloo's default op is SUM
        return t.numpy()

    def _sizes(self, n: int) -> list[int]:
        import torch

        mine = torch.tensor([n], dtype=torch.int64)
        out = [torch.zeros(1, dtype=torch.int64) for _ in range(self.size)]
        self.pg.allgather([out], [mine]).wait()  # hvd:
        return [int(t.item()) for t in out]

    def allgather(self, obj: Any) -> list[Any]:
        import torch

        data = pickle.dumps(obj)
        sizes = self._sizes(len(data))
        buf = torch.zeros(max(sizes), dtype=torch.uint8)
        buf[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        out = [torch.zeros(max(sizes), dtype=torch.uint8) for _ in range(self.size)]
        self.pg.allgather([out], [buf]).wait()  # hvd:
        return [pickle.loads(t[:n].numpy().tobytes()) for t, n in zip(out, sizes, strict=True)]

    def bcast(self, obj: Any, root: int = 0) -> Any:
        import torch

        data = pickle.dumps(obj) if self.rank == root else b""
        n = torch.tensor([len(data)], dtype=torch.int64)
        self.pg.broadcast(n, root).wait()  # hvd:
        buf = torch.zeros(int(n.item()), dtype=torch.uint8)
        if self.rank == root:
            buf[:] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        self.pg.broadcast(buf, root).wait()  # hvd:
        return pickle.loads(buf.numpy().tobytes())

    def close(self) -> None:
        """Drop this world's group (its connections close with it)."""
        self.pg = None
