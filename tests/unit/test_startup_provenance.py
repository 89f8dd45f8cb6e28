"""A start-up raw file says which MPI ran (issue 50): new files record the library and the
transports in force; files from before say that they do not, rather than leaving it out."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from hvdscale.records.provenance import mpi_transports

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("bench_startup", ROOT / "bench/bench_startup.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def test_the_transports_in_force_are_named() -> None:
    assert mpi_transports({}) == "Open MPI's defaults"
    env = {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,tcp", "OMPI_MCA_coll": "^hcoll"}
    assert mpi_transports(env) == "btl=self,tcp, pml=ob1"


def test_the_render_names_the_mpi_or_says_it_was_not_recorded() -> None:
    bench = _bench()
    old = json.loads((ROOT / "bench/results/withdrawn/startup_quiet.json").read_text())
    first = bench.render(old).splitlines()[0]
    assert first.endswith("MPI not recorded in this raw file (measured before issue 50).")
    new = {**old, "mpi": "mpirun (Open MPI) 4.1.4", "mpi_transports": "btl=self,tcp"}
    assert bench.render(new).splitlines()[0].endswith(
        "quiet=True; mpirun (Open MPI) 4.1.4, transports: btl=self,tcp.")
