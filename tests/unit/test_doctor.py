"""The doctor's ok/warn/fail decisions on crafted facts: states this machine cannot produce
(no Horovod, a Horovod built for another torch, GPUs, more ranks than cores, several hosts)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hvdscale.doctor import bench, cluster, host, network, ranks, report, software
from hvdscale.doctor.bench import BUDGET_S
from hvdscale.doctor.lines import FAIL, OK, WARN, Line, Plan, worst
from hvdscale.doctor.run import DoctorArgs, Launch, deadline_s, judge, make_plan

HVD_BUILT = {"mpi": 1, "gloo": 1, "nccl": 0, "cuda": 0, "rocm": 0, "ccl": 0, "ddl": 0}
UNDEFINED = ("ImportError: /venv/lib/python3.11/site-packages/horovod/torch/mpi_lib_v2.cpython-"
             "311-x86_64-linux-gnu.so: undefined symbol: _ZN3c1017RegisterOperatorsD1Ev")


def probe(version: str, **kw: Any) -> dict[str, Any]:
    return {"ok": True, "version": version, "cuda": None, "cudnn": None, "nccl": None,
            "gpus": [], "horovod": {"installed": True, "loads": True, "built": dict(HVD_BUILT)},
            **kw}


def facts(host_name: str = "a", **over: Any) -> dict[str, Any]:
    """One rank's facts as gather() returns them, on a healthy 2-core CPU host."""
    f = {
        "host": host_name, "python": "3.11.7", "executable": "/venv/bin/python",
        "versions": {"hvdscale": "0.1.0", "python": "3.11.7", "torch": "2.13.0+cpu",
                     "tensorflow": "2.21.0", "horovod": "0.28.1", "mpi4py": "4.1.2",
                     "numpy": "2.1.0", "mpi": "Open MPI v4.1.4"},
        "launchers": {"mpirun": "/usr/bin/mpirun", "horovodrun": None, "srun": None},
        "cores": 2, "affinity": [0, 1], "load": [0.1, 0.1, 0.1], "omp_threads": None,
        "disk": {"out": "results", "existing": "/w", "free": 50 * 2**30, "total": 2**40,
                 "writable": True},
        "net": {"addresses": [["eth0", "10.0.0.2", "255.255.255.0"]],
                "stats": {"eth0": {"up": True, "speed": 10000}}},
        "slurm": {},
        "hostfacts": {"probes": {"torch": probe("2.13.0+cpu"), "tf": probe("2.21.0")},
                      "driver": None,
                      "horovod_built_for": {"tensorflow": "2.21.0", "pytorch": "2.13.0+cpu"}},
    }
    f.update(over)
    return f


def status_of(lines: list[Line], check: str) -> Line:
    return next(ln for ln in lines if ln.check == check)


PLAN = Plan(2, None, "results", {"a": 2}, "this host")


def test_healthy_host_is_all_ok() -> None:
    lines = judge([facts()], PLAN, Launch())
    assert worst(lines) == OK, report.text(lines, "")
    assert (status_of(lines, "horovod").value
            == "0.28.1: torch, tensorflow; MPI, Gloo; no NCCL, no CUDA")


def test_no_horovod_warns_and_fails_for_its_strategy() -> None:
    f = facts()
    f["versions"]["horovod"] = None
    f["hostfacts"]["horovod_built_for"] = None
    for p in f["hostfacts"]["probes"].values():
        p["horovod"] = {"installed": False}
    lines = judge([f], PLAN, Launch())
    assert status_of(lines, "horovod").status == WARN
    assert not any(ln.check.startswith("horovod+") for ln in lines)
    assert worst(lines) == WARN
    line = software.check_horovod(f, Plan(2, "horovod"))
    assert line.status == FAIL and "install" in line.fix
    # Metadata left behind by a removed package: the probes' import decides.
    f["versions"]["horovod"] = "0.28.1"
    assert software.check_horovod(f, PLAN).value.startswith("not installed")


def test_horovod_built_for_another_torch_fails_naming_both_versions_and_the_symbol() -> None:
    f = facts()
    f["hostfacts"]["horovod_built_for"]["pytorch"] = "2.1.0"
    f["hostfacts"]["probes"]["torch"]["horovod"] = {"installed": True, "loads": False,
                                                    "error": UNDEFINED}
    line = software.check_horovod_fit("torch", f)
    assert line is not None and line.status == FAIL
    assert line.value == ("undefined symbol _ZN3c1017RegisterOperatorsD1Ev: built for torch "
                          "2.1.0, installed 2.13.0+cpu")
    assert "rebuild" in line.fix
    # TensorFlow's extension still loads: Horovod itself is reported from it, ok.
    assert software.check_horovod(f, PLAN).status == OK
    assert software.check_horovod_fit("tf", f).status == OK


def test_undefined_symbol_is_a_fail_even_when_the_recorded_versions_agree() -> None:
    f = facts()
    f["hostfacts"]["probes"]["torch"]["horovod"] = {"installed": True, "loads": False,
                                                    "error": UNDEFINED}
    line = software.check_horovod_fit("torch", f)
    assert line.status == FAIL
    assert line.value == ("undefined symbol _ZN3c1017RegisterOperatorsD1Ev: the extension does "
                          "not fit the installed torch 2.13.0+cpu")
    # The wrapped error Horovod raises when the recorded version differs: named as such.
    f["hostfacts"]["horovod_built_for"]["pytorch"] = "2.1.0"
    f["hostfacts"]["probes"]["torch"]["horovod"]["error"] = (
        "HorovodVersionMismatchError: Framework pytorch installed with version 2.13.0+cpu but "
        "found version 2.1.0.")
    line = software.check_horovod_fit("torch", f)
    assert line.value == "does not load: built for torch 2.1.0, installed 2.13.0+cpu"


def test_horovod_that_loads_but_was_built_for_another_version_warns() -> None:
    f = facts()
    f["hostfacts"]["horovod_built_for"]["tensorflow"] = "2.20.0"
    line = software.check_horovod_fit("tf", f)
    assert line.status == WARN and "2.20.0" in line.value and "2.21.0" in line.value


def test_horovod_built_without_a_framework_fails_for_it() -> None:
    f = facts()
    f["hostfacts"]["horovod_built_for"]["tensorflow"] = "none"
    f["hostfacts"]["probes"]["tf"]["horovod"] = {
        "installed": True, "loads": False,
        "error": "ImportError: Extension horovod.tensorflow has not been built"}
    line = software.check_horovod_fit("tf", f)
    assert line.status == FAIL and "HOROVOD_WITH_TENSORFLOW=1" in line.fix


def test_frameworks_missing_or_broken() -> None:
    torch_only = facts()
    del torch_only["hostfacts"]["probes"]["tf"]
    torch_only["versions"]["tensorflow"] = None
    assert software.check_framework("tf", torch_only, PLAN).status == OK
    assert software.check_framework("tf", torch_only, Plan(2, "mwms")).status == FAIL
    none = copy.deepcopy(torch_only)
    del none["hostfacts"]["probes"]["torch"]
    none["versions"]["torch"] = None
    assert software.check_framework("torch", none, PLAN).status == FAIL
    broken = facts()
    broken["hostfacts"]["probes"]["torch"] = {"ok": False, "error": "OSError: libc10.so"}
    line = software.check_framework("torch", broken, PLAN)
    assert line.status == FAIL and "libc10.so" in line.value
    assert software.check_horovod_fit("torch", broken) is None


def test_mpi_and_launchers() -> None:
    f = facts()
    assert software.check_mpi(f).status == OK
    f["versions"]["mpi"] = None
    assert software.check_mpi(f).status == FAIL
    f["launchers"] = {"mpirun": None, "horovodrun": "/bin/horovodrun", "srun": None}
    assert software.check_launchers(f).status == FAIL


def test_under_torchrun_no_mpi_warns_and_the_strategy_is_judged_for_the_launch() -> None:
    f = facts(launch="torchrun", launchers={"torchrun": "/venv/bin/torchrun"},
              versions={**facts()["versions"], "mpi4py": None, "mpi": None})
    mpi = software.check_mpi(f)
    assert mpi.status == WARN and "torchrun runs ddp and independent without it" in mpi.value
    assert software.check_launchers(f).status == OK
    assert software.check_mpi({**f, "launch": "mpi"}).status == FAIL
    ps = status_of(judge([f], Plan(2, "ps", "results", {"a": 2}, "this host"), Launch()),
                   "strategy")
    assert ps.status == FAIL and ps.value.startswith("strategy.name=ps does not run under torchrun")
    ddp = status_of(judge([f], Plan(2, "ddp", "results", {"a": 2}, "this host"), Launch()),
                    "strategy")
    assert ddp.status == OK


def test_code_versions_and_nccl_beside_horovods() -> None:
    assert software.code_version(21803) == "2.18.3"
    assert software.code_version(2708) == "2.7.8"
    assert software.code_version(90100) == "9.1.0"
    assert software.code_version(0) is None
    f = facts()
    assert software.check_nccl(f).status == OK
    f["hostfacts"]["probes"]["torch"].update(nccl="2.21.5", cuda="12.4",
                                             gpus=[{"name": "H100", "memory": 0}])
    assert software.check_nccl(f).status == WARN  # Horovod without NCCL on a GPU host
    for p in f["hostfacts"]["probes"].values():
        p["horovod"]["built"]["nccl"] = 22105
    assert software.check_nccl(f).status == OK
    for p in f["hostfacts"]["probes"].values():
        p["horovod"]["built"]["nccl"] = 21803
    line = software.check_nccl(f)
    assert line.status == WARN and "torch 2.21.5, Horovod 2.18.3" in line.value


GPU = {"name": "NVIDIA H100 80GB HBM3", "memory": 80 * 2**30, "capability": "9.0"}


def gpu_facts(*gpus: dict[str, Any]) -> dict[str, Any]:
    f = facts()
    f["hostfacts"]["probes"]["torch"].update(cuda="12.4", cudnn=90100, gpus=list(gpus))
    f["hostfacts"]["driver"] = "550.54.15"
    return f


def test_gpu_table() -> None:
    line = host.check_gpus(gpu_facts(GPU, GPU), 2)
    assert line.status == OK
    assert line.value == ("2 x NVIDIA H100 80GB HBM3 (80 GiB), driver 550.54.15, CUDA 12.4, "
                          "cuDNN 9.1.0")
    crowded = host.check_gpus(gpu_facts(GPU, GPU), 4)
    assert crowded.status == WARN and "4 ranks share them" in crowded.value
    mixed = host.check_gpus(gpu_facts(GPU, {**GPU, "name": "NVIDIA A100"}), 2)
    assert mixed.status == WARN
    blind = host.check_gpus(gpu_facts(), 1)
    assert blind.status == WARN and "CUDA 12.4" in blind.value
    assert host.check_gpus(facts(), 2) == Line("gpus", OK, "none (CPU build)")


def test_more_ranks_than_cores() -> None:
    assert host.check_cores(2, 2, None, 2).status == OK
    line = host.check_cores(2, 3, None, 2)
    assert line.status == WARN and "more ranks than cores" in line.value
    threads = host.check_cores(8, 2, "8", 8)
    assert threads.status == WARN and "OMP_NUM_THREADS=4" in threads.fix
    lines = judge([facts()], Plan(8, None, "results", {"a": 8}, "this host"), Launch())
    assert status_of(lines, "cores").status == WARN


def test_load_on_both_sides_of_the_line() -> None:
    assert host.check_load(0.4, 2, 2, 1).status == OK
    assert host.check_load(0.6, 2, 2, 1).status == WARN
    assert host.check_load(5.0, 16, 4, 2).status == OK
    assert host.check_load(9.0, 16, 4, 2).status == WARN


def test_disk() -> None:
    d = facts()["disk"]
    assert host.check_disk(d).status == OK
    assert host.check_disk({**d, "free": 500 * 2**20}).status == WARN
    assert host.check_disk({**d, "free": 10 * 2**20}).status == FAIL
    assert host.check_disk({**d, "writable": False}).status == FAIL


def two_hosts(b_addr: str = "10.0.0.3", b_name: str = "eth0") -> list[dict[str, Any]]:
    b = facts("b", net={"addresses": [[b_name, b_addr, "255.255.255.0"]],
                        "stats": {b_name: {"up": True, "speed": 1000}}})
    return [facts("a"), b]


def test_network_of_several_hosts() -> None:
    nets = [h["net"] for h in two_hosts()]
    line = network.check_common(nets, 2)
    assert line.status == OK and line.value.startswith("eth0 (10.0.0.2) chosen")
    assert network.link_class(nets) == ("eth0 1 GbE", pytest.approx(0.0625))
    renamed = [h["net"] for h in two_hosts(b_name="ens5")]
    assert network.check_common(renamed, 2).status == WARN
    apart = [h["net"] for h in two_hosts(b_addr="192.168.9.9")]
    assert network.check_common(apart, 2).status == FAIL
    assert network.check_common(nets[:1], 1).status == OK
    assert network.check_common(nets[:1], 3).status == WARN
    assert network.link_class(nets[:1])[0] == "shared memory (one host)"


def test_differences_between_ranks_and_hosts() -> None:
    a, b = two_hosts()
    b["versions"]["torch"] = "2.12.0"
    b["hostfacts"]["probes"]["torch"]["gpus"] = [GPU]
    b2 = facts("b", hostfacts=None)
    lines = ranks.differences([a, b, b2])
    torch = status_of(lines, "differs: torch")
    assert torch.status == FAIL
    assert torch.value == "2.13.0+cpu on rank 0,2 (a, b); 2.12.0 on rank 1 (b)"
    assert status_of(lines, "differs: gpus").status == WARN
    assert ranks.differences([facts(), facts()]) == []
    assert ranks.ranges([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"


def test_judge_over_two_hosts_names_each_hosts_lines() -> None:
    a, b = two_hosts()
    b["load"] = [7.0, 7.0, 7.0]
    plan = Plan(4, None, "results", {"a": 2, "b": 2}, "launch")
    lines = judge([a, facts("a", hostfacts=None), b, facts("b", hostfacts=None)], plan,
                  Launch(4, "mpi"))
    assert status_of(lines, "load (a)").status == OK
    assert status_of(lines, "load (b)").status == WARN
    assert status_of(lines, "network").status == OK
    # Same interface names and versions on both hosts: nothing differs.
    assert not [ln for ln in lines if ln.check.startswith("differs")]
    b["net"]["addresses"][0][0] = "ens5"
    renamed = judge([a, b], plan, Launch(2, "mpi"))
    assert status_of(renamed, "differs: interfaces").status == WARN


def test_layouts() -> None:
    assert cluster.fill_slots(3, [("a", 2), ("b", 2)]) == ({"a": 2, "b": 1}, "")
    hosts, err = cluster.fill_slots(5, [("a", 2), ("b", 2)])
    assert hosts == {"a": 2, "b": 2} and "5 ranks do not fit the hostfile's 4 slots" in err
    assert cluster.spread(5, ["a", "b"]) == {"a": 3, "b": 2}
    slurm = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_JOB_NUM_NODES": "2",
             "SLURM_NTASKS": "4"}
    plan = make_plan(DoctorArgs(), [facts(slurm=slurm)])
    assert plan.np == 4 and plan.hosts == {"n[1-2]#1": 2, "n[1-2]#2": 2}
    assert cluster.check_slurm(slurm, plan).status == OK
    assert cluster.check_slurm(slurm, Plan(6)).status == WARN
    over = make_plan(DoctorArgs(np=5, hostfile=[("a", 2), ("b", 2)]), [facts()])
    assert cluster.check_plan(over).status == FAIL


def test_launch_of_separate_one_rank_jobs_fails() -> None:
    assert cluster.check_launch(1, 4, "mpi").status == FAIL
    assert cluster.check_launch(4, 4, "mpi").status == OK
    assert cluster.launcher_size({"OMPI_COMM_WORLD_SIZE": "3"}) == 3


def test_bench_against_the_link() -> None:
    pts = [{"bytes": 1 << 20, "time_s": 1e-3, "busbw_GBps": 0.5}]
    assert bench.check_bench(pts, "shared memory", 1.0, 2).status == WARN
    assert bench.check_bench([{**pts[0], "busbw_GBps": 2.0}], "x", 1.0, 2).status == OK
    assert bench.check_bench([], "x", 1.0, 1).status == OK
    assert bench.busbw_factor(2) == 1.0


def test_report_text_is_aligned_and_counts() -> None:
    lines = [Line("a", OK, "1"), Line("long-name", FAIL, "2", "do this")]
    out = report.text(lines, "title").splitlines()
    assert out == ["title", "ok    a          1", "fail  long-name  2",
                   "                 fix: do this", "1 ok, 0 warn, 1 fail"]
    with pytest.raises(ValueError):
        Line("x", "bad", "")


def test_the_deadline_is_the_probes_limit_plus_a_minute_unless_given() -> None:
    # The integration test waits out a 20-s --deadline; the default is checked here.
    assert deadline_s(DoctorArgs(timeout=5.0)) == 65.0
    assert deadline_s(DoctorArgs(timeout=5.0, bench=True)) == 65.0 + 2 * BUDGET_S
    assert deadline_s(DoctorArgs(timeout=5.0, bench=True, deadline=20.0)) == 20.0
