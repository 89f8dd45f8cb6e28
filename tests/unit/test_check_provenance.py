"""Issue 50: check_benchmarks refuses a start-up raw file that does not name its MPI (seen
failing on the four start-up files made before issue 50) and a device record without its MPI,
its load or, on a GPU, the GPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "checks"))

import check_provenance as cp  # noqa: E402

from hvdscale.records.fields import Record  # noqa: E402
from hvdscale.records.kinds import typed  # noqa: E402
from tests.records_fixture import (  # noqa: E402
    failed_record,
    gemm_record,
    launch_cost,
    run_dict,
)

_STARTUP = {"bench": "startup", "mpi_library": "Open MPI v4.1.4", "mpi_transports":
            "Open MPI's defaults", "rounds": [{"round": 1, "np": 1, "load": 0.7}]}
_RUN = run_dict("name=horovod-np2", ranks=2, words_per_s=1000.0, loadavg=[1.0, 1.0, 1.0],
                versions={"mpi": "Open MPI v5.0.11"}, device={"gpu": None})


def _run(**fields: object) -> Record:
    """``_RUN`` with ``fields`` changed, typed as the check reads it."""
    return typed({**_RUN, **fields})


def test_a_startup_file_must_name_its_mpi_and_its_loads() -> None:
    assert cp.startup_problems("s.json", _STARTUP) == []
    old = {k: v for k, v in _STARTUP.items() if k not in ("mpi_library", "mpi_transports")}
    assert cp.startup_problems("s.json", old) == [
        "start-up raw file s.json does not name mpi_library, mpi_transports: its figures "
        "cannot be stated"]
    unloaded = {**_STARTUP, "rounds": [{"round": 1, "np": 1}]}
    assert "the load of every round" in cp.startup_problems("s.json", unloaded)[0]
    assert cp.startup_problems("x.json", {"bench": "fusion"}) == []


def test_a_device_record_names_its_mpi_its_load_and_its_gpu() -> None:
    assert cp.record_problems("r", _run(), {}) == []
    no_mpi = _run(versions={"mpi": None})
    assert cp.record_problems("r", no_mpi, {}) == [
        "r: horovod-np2 does not name its MPI library (versions.mpi)"]
    assert "host's load" in cp.record_problems("r", _run(loadavg=[]), {})[0]
    on_gpu = _run(device={**_RUN["device"], "gpu": {"count": 1}})
    assert cp.record_problems("r", on_gpu, {}) == [
        "r: horovod-np2 ran on a GPU and names none (record or machine.json)"]
    assert cp.record_problems("r", on_gpu, {"gpu": "NVIDIA H100 80GB HBM3"}) == []
    named = _run(device={**_RUN["device"], "gpu": {"model": "NVIDIA H200"}})
    assert cp.record_problems("r", named, {}) == []
    assert cp.record_problems("r", gemm_record(device="cuda", versions={"mpi": "x"}),
                              {})  # a GEMM curve, no GPU
    assert cp.record_problems("r", launch_cost(), {}) == []  # a timing line: no figure
    assert cp.record_problems("r", failed_record(), {}) == []  # a failed point: none either


def test_the_check_reads_named_files_and_every_record_beside_a_machine_json(
        tmp_path: Path) -> None:
    (tmp_path / "startup_a.json").write_text(json.dumps(_STARTUP))
    (tmp_path / "startup_b.json").write_text(json.dumps({**_STARTUP, "mpi_library": None}))
    loan = tmp_path / "loan" / "gpu"
    (loan / "seeds").mkdir(parents=True)
    (loan / "machine.json").write_text(json.dumps({"cores": 16}))
    (loan / "seeds" / "results.jsonl").write_text(
        json.dumps(_RUN) + "\n" + json.dumps({**_RUN, "versions": {}}) + "\n")
    (loan / "seeds" / "sweep_timing.jsonl").write_text(json.dumps(
        {k: v for k, v in launch_cost().to_dict().items() if k not in ("kind", "schema")}) + "\n")
    text = "raw: `bench/results/startup_a.json` and `bench/results/startup_b.json`."
    n, bad = cp.check_provenance([text], tmp_path)
    assert n == 5
    assert bad == ["start-up raw file startup_b.json does not name mpi_library: its figures "
                   "cannot be stated",
                   "loan/gpu/seeds/results.jsonl: horovod-np2 does not name its MPI library "
                   "(versions.mpi)"]


def test_check_benchmarks_refuses_a_startup_file_made_before_issue_50(tmp_path: Path) -> None:
    data = json.loads((ROOT / "bench/results/withdrawn/startup_quiet.json").read_text())
    assert "mpi_library" not in data  # made before issue 50
    md = (ROOT / "bench" / "BENCHMARKS.md").read_text()
    copy = tmp_path / "BENCHMARKS.md"
    copy.write_text(md + "\nStart-up, raw: `bench/results/withdrawn/startup_quiet.json`.\n")
    r = subprocess.run([sys.executable, "tools/checks/check_benchmarks.py", "--md", str(copy)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 1
    assert ("MISMATCH start-up raw file withdrawn/startup_quiet.json does not name "
            "mpi_library, mpi_transports") in r.stdout
