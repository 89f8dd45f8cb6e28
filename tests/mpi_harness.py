"""Multi-rank pytest harness: every rank runs the same session under mpirun, horovodrun or
torchrun (tests/mpi_ddp and tests/torchrun there: no MPI, a ``TorchWorld``).

Imported by the conftest.py of tests/mpi and tests/harness_selftest.

* one junit file per rank (``$HVDSCALE_TEST_REPORTS/<launcher>-np<N>-rank<R>.xml``);
* a per-test timeout that dumps every thread's stack and exits non-zero, so the launcher ends
  the whole job instead of a hang blocking CI;
* outcomes are exchanged after each test: a test that failed on rank 1 also fails on rank 0,
  with rank 1's message, so a failure on any rank is visible in the main output.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import tempfile

import pytest

from hvdscale.core.world import (
    HorovodWorld,
    MPIWorld,
    World,
    init_horovod,
    is_gloo_launch,
    is_torchrun_launch,
)
from hvdscale.frameworks import load_framework

TEST_TIMEOUT_S = float(os.environ.get("HVDSCALE_TEST_TIMEOUT", "120"))
# The framework whose Horovod integration this session starts (one runtime per process):
# tests/mpi runs with torch, tests/mpi_tf with tf (its conftest sets this before import).
FRAMEWORK = os.environ.get("HVDSCALE_TEST_FRAMEWORK", "torch")
_WORLD: World | None = None


def world() -> World:
    assert _WORLD is not None
    return _WORLD


def launcher() -> str:
    if is_torchrun_launch():
        return "torchrun"
    if is_gloo_launch():
        return "horovodrun-gloo"
    if "HOROVOD_HOSTNAME" in os.environ or "HOROVOD_RANK" in os.environ:
        return "horovodrun-mpi"
    if "SLURM_PROCID" in os.environ and "OMPI_COMM_WORLD_RANK" not in os.environ:
        return "srun"
    return "mpirun"


def _fw_tag() -> str:
    """File-name tag of a non-default framework session (torch's files keep their names)."""
    return "" if FRAMEWORK == "torch" else f"-{FRAMEWORK}"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    global _WORLD, _VERDICTS
    if is_torchrun_launch():
        from hvdscale.core.world_torch import TorchWorld

        # As MPI's below: the outcomes travel on a group of their own.
        _WORLD, _VERDICTS = TorchWorld(), TorchWorld()
    elif is_gloo_launch():
        # hvd: no MPI job under --gloo: Horovod is the only channel
        horovod = load_framework(FRAMEWORK).HOROVOD
        init_horovod({}, horovod.module)  # hvd:
        _WORLD = HorovodWorld(horovod)
    else:
        _WORLD = MPIWorld()
        # The outcomes' exchange gets a communicator of its own: on the world's, a rank that
        # left a test early would answer, from its teardown, a collective of the test that
        # another rank is still running, and then that rank would wait alone for ever.
        _VERDICTS = _WORLD.comm.Dup()
    reports = os.environ.get("HVDSCALE_TEST_REPORTS")
    if reports:
        os.makedirs(reports, exist_ok=True)
        config.option.xmlpath = os.path.join(
            reports, f"{launcher()}{_fw_tag()}-np{_WORLD.size}-rank{_WORLD.rank}.xml")
    sys.stdout.write(f"[hvdscale tests] launcher={launcher()} framework={FRAMEWORK} "
                     f"rank={_WORLD.rank} "
                     f"size={_WORLD.size} backend={_WORLD.backend}\n")


_HANG_LOG = None
_VERDICTS = None
"""The MPI communicator (torchrun: the world) the ranks exchange each test's outcome on (None
under --gloo)."""


@pytest.fixture(autouse=True)
def _hang_timeout(request: pytest.FixtureRequest) -> object:
    # pytest captures fd 2 during a test, so a dump there would vanish with the process: write
    # it to this rank's hang log (tests/run.sh prints hang logs when a phase fails).
    global _HANG_LOG
    if _HANG_LOG is None:
        w = world()
        d = os.environ.get("HVDSCALE_TEST_REPORTS") or tempfile.gettempdir()
        os.makedirs(d, exist_ok=True)
        _HANG_LOG = open(os.path.join(
            d, f"hang-{launcher()}{_fw_tag()}-np{w.size}-rank{w.rank}.log"), "w")
    _HANG_LOG.write(f"armed {TEST_TIMEOUT_S:g}s for {request.node.nodeid}\n")
    _HANG_LOG.flush()
    faulthandler.dump_traceback_later(TEST_TIMEOUT_S, exit=True, file=_HANG_LOG)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        item._hvd_failure = f"{rep.when}: {rep.longreprtext[-3000:]}"  # type: ignore[attr-defined]
    if rep.when != "teardown":
        return
    # Teardown runs on every rank for every test (skipped ones too), so all ranks meet here.
    w = world()
    mine = getattr(item, "_hvd_failure", "")
    if mine and _HANG_LOG is not None:  # if the job ends in the exchange, this stays said
        _HANG_LOG.write(f"failed: {item.nodeid}\n{mine}\n")
        _HANG_LOG.flush()
    # Under the same limit as the test: a rank still inside the test (stuck in a collective
    # this one left) or one gone altogether ends the job, never an endless wait here.
    faulthandler.dump_traceback_later(TEST_TIMEOUT_S, exit=True, file=_HANG_LOG or sys.stderr)
    try:
        everyone = _VERDICTS.allgather(mine) if _VERDICTS is not None else w.allgather(mine)
    finally:
        faulthandler.cancel_dump_traceback_later()
    others = [(r, msg) for r, msg in enumerate(everyone) if msg and r != w.rank]
    if others and not mine:
        rep.outcome = "failed"
        rep.longrepr = "\n".join(f"failed on rank {r} of {w.size}:\n{msg}" for r, msg in others)


@pytest.fixture(scope="session")
def comm_world() -> World:
    return world()


@pytest.fixture(scope="session")
def hvd() -> object:
    """The session framework's Horovod (``horovod.torch`` or ``horovod.tensorflow``),
    initialised once (over MPI unless --gloo)."""
    return init_horovod({}, load_framework(FRAMEWORK).HOROVOD.module)


needs_mpi = pytest.mark.skipif(is_gloo_launch() or is_torchrun_launch(),
                               reason="mpi4py point-to-point needs an MPI launch, not --gloo")
