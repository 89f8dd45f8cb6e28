"""The ``torchrun`` launch of a sweep's points: one node, ``--standalone`` (torchrun's own c10d
store on a free port), torchrun's restarts off, every rank running the point's command line.

torchrun starts no MPI job: the ranks' world is torchrun's (``hvdscale.core.world_torch``), the
strategies that need MPI are refused in the plan (the registry's ``launches``), and a round's
points at one rank count share one torchrun, as under mpirun (``hvdscale run-points``: its ranks
agree on how each point ended over torchrun's store, ``hvdscale.train.agree.agree_on_store``).
Several nodes under torchrun are one agent per node: launch/slurm/multinode_torchrun.sbatch.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from hvdscale.errors import HvdscaleError


def torchrun_prefix(ranks: int, hostfile_path: Path | None = None) -> list[str]:
    """torchrun's part of a launch line for ``ranks`` ranks on this host; the program follows
    as a command (``--no-python``), so it is the same command line every launcher runs.

    ``--max-restarts 0``: a failed rank ends the point (a restart would train it again and
    record a run that was not measured as one); ``--monitor-interval 0.1``: the others are ended
    within a tenth of a second of it.
    """
    if hostfile_path is not None:
        raise HvdscaleError("--hostfile does not apply to --launcher torchrun (one agent per "
                            "node; see launch/slurm/multinode_torchrun.sbatch)")
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
            "--nproc-per-node", str(ranks), "--max-restarts", "0", "--monitor-interval", "0.1",
            "--no-python"]


def check_torchrun() -> None:
    """Refuse ``--launcher torchrun`` where torch (which brings torchrun) is not installed."""
    if importlib.util.find_spec("torch") is None:
        raise HvdscaleError("--launcher torchrun needs PyTorch (pip install torch)")
