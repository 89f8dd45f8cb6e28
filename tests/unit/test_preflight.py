"""The preflight (hvdscale.train.preflight): every refusal of a run in one error, the same on
every rank, on a world of stand-in ranks (no MPI in the pytest process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hvdscale.config import load_config
from hvdscale.config.run import check_precision_device
from hvdscale.core.device import CPU, Placement
from hvdscale.errors import ConfigError
from hvdscale.train.preflight import Refused, preflight

TF32 = "tf32 is a GPU tensor-core mode and this rank computes on the CPU"


class _World:
    """Rank ``rank`` of ``size``; its allgather hands back what every rank sent, here its own
    and ``others`` (what the other ranks would send)."""

    backend = "mpi"

    def __init__(self, rank: int = 0, size: int = 1, others: list[Any] | None = None) -> None:
        self.rank, self.size, self.others = rank, size, others or []

    def allgather(self, obj: Any) -> list[Any]:
        return [obj, *self.others]


def _blocked(tmp_path: Path) -> Path:
    """A results directory that cannot be made: a file stands where its parent would."""
    (tmp_path / "file").write_text("")
    return tmp_path / "file" / "results"


def test_two_problems_are_one_error_listing_both(tmp_path: Path) -> None:
    cfg = load_config(None, ["precision=tf32", "strategy.name=independent"])
    with pytest.raises(Refused) as e:
        preflight(cfg, _blocked(tmp_path), _World(), CPU, None)
    assert len(e.value.lines) == 2, e.value.lines
    assert e.value.lines[0].startswith(f"precision {TF32}")
    assert e.value.lines[1].startswith(f"results directory {_blocked(tmp_path)} is not writable")
    # One line each, under one heading that counts them.
    text = str(e.value).splitlines()
    assert text[0] == "this run is refused for 2 reasons:"
    assert [t.removeprefix("  - ") for t in text[1:]] == e.value.lines


def test_the_launch_the_device_and_the_results_directory_at_once(tmp_path: Path) -> None:
    cfg = load_config(None, ["precision=tf32", "strategy.name=ps", "strategy.ps.num_servers=3"])
    with pytest.raises(Refused) as e:
        preflight(cfg, _blocked(tmp_path), _World(size=2, others=[(None, [])]), CPU, None)
    assert e.value.lines[0] == ("strategy.ps.num_servers=3 is more than the 2 ranks of this "
                                "job")
    assert TF32 in e.value.lines[1] and "is not writable" in e.value.lines[2]


def test_one_problem_reads_as_its_check_says_it(tmp_path: Path) -> None:
    cfg = load_config(None, ["strategy.name=independent"])
    with pytest.raises(Refused) as e:
        preflight(cfg, _blocked(tmp_path), _World(), CPU, None)
    assert str(e.value) == (f"results directory {_blocked(tmp_path)} is not writable: "
                            "Not a directory")


def test_every_rank_says_what_any_rank_refused(tmp_path: Path) -> None:
    # Rank 1 of 2 finds nothing itself; rank 0 found a tf32 on its CPU and an unwritable
    # directory: rank 1 raises the same error, and a refusal of both ranks is said once.
    cfg = load_config(None, ["precision=tf32", "strategy.name=independent"])
    with pytest.raises(ConfigError) as tf32:
        check_precision_device("tf32", "cpu")
    rank0 = (None, [str(tf32.value), "results directory x is not writable"])
    with pytest.raises(Refused) as e:
        preflight(cfg, tmp_path, _World(rank=1, size=2, others=[rank0]), CPU, None)
    assert e.value.lines == [str(tf32.value), "results directory x is not writable"]


def test_a_run_it_passes_learns_which_ranks_share_a_gpu(tmp_path: Path) -> None:
    import socket

    cfg = load_config(None, ["strategy.name=independent"])
    gpu = Placement("cuda", 0, 1)
    world = _World(size=2, others=[((socket.gethostname(), 0), [])])
    assert preflight(cfg, tmp_path / "out", world, gpu, None) == [[0, 1]]
    assert (tmp_path / "out").is_dir()  # rank 0 proved it can write there
