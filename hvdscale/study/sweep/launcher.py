"""Starting N ranks of a program under ``mpirun``, ``horovodrun``, ``srun`` or ``torchrun``
(``hvdscale.study.sweep.torchrun``).

The layer every multi-rank study tool shares (``hvdscale sweep``, ``fusion``, ``batch``,
``commbench``): where ranks may go (a hostfile's slots, a SLURM allocation, this host's cores),
the launcher's command line and environment, the command every rank runs (``rank_command``),
what a launch left behind (its records, the telling line of its stderr); the launch itself is
started by ``hvdscale.study.sweep.process``. Run as a module it starts (or prints) one such
launch of any program, so shell scripts (bench/run_all.sh) place their ranks as the sweep does.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hvdscale.errors import HvdscaleError
from hvdscale.records.fields import Record
from hvdscale.records.store import read_records, results_path
from hvdscale.study.sweep.hostfile import Hostfile, parse_hostfile

LAUNCHERS = ("mpirun", "horovodrun", "srun", "torchrun")

# What remote ranks need from the launching shell. mpirun starts remote ranks through ssh with
# the remote login's environment, so these travel with ``-x``; horovodrun already exports the
# whole environment and srun does by default (--export=ALL). OMPI_MCA_* need no -x: mpirun
# forwards MCA parameters itself, and the runner sets mpi_yield_when_idle per process.
EXPORT_VARS = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONUNBUFFERED", "VIRTUAL_ENV",
               "PYENV_VERSION", "CONDA_PREFIX", "TF_CPP_MIN_LOG_LEVEL")
EXPORT_PREFIXES = ("HOROVOD_", "HVDSCALE_", "NCCL_")

# mpirun's and srun's closing boilerplate says nothing about why a rank failed; left out of
# the error (srun's "task N: Killed" follows the line that says why, e.g. "Node failure on X").
_BOILERPLATE = re.compile(
    r"^(-{5,}|Primary job +terminated|a non-zero exit code|Per user-direction|"
    r"mpirun (detected|noticed|has exited)|Process name:|Exit code:|\[[\w.-]+:\d+\] \d+ more|"
    r"Set MCA parameter|srun: (error: )?(Job step aborted|.*Terminating|Force Terminated)|"
    r"srun: error: [\w.-]+: tasks? [\d,-]+: (Killed|Terminated)$|"
    # TensorFlow's start-up log lines (glog format, absl's notice): never the reason.
    r"[IW]\d{4} \d\d:\d\d:[\d.]+ +\d+ [\w.]+:\d+\]|"
    r"WARNING: All log messages before absl::InitializeLog)")


# --- where ranks may go (checked before any launch) ------------------------------------------

def check_launcher(launcher: str) -> None:
    """Refuse a launcher name hvdscale cannot drive."""
    if launcher not in LAUNCHERS:
        raise HvdscaleError(f"unknown launcher {launcher!r}; choose from {', '.join(LAUNCHERS)}")


def _local_slots(launcher: str, env: Mapping[str, str]) -> tuple[int, str]:
    """Ranks a launch without a hostfile can hold here, and where that number comes from."""
    if env.get("SLURM_JOB_ID"):
        # Inside an allocation srun and mpirun both place ranks on the allocation's tasks.
        ntasks = env.get("SLURM_NTASKS") or env.get("SLURM_NPROCS") or ""
        if ntasks.isdigit() and launcher != "horovodrun":
            return int(ntasks), f"the SLURM allocation's SLURM_NTASKS={ntasks}"
    from hvdscale.core.threads import cores_on_host

    n = cores_on_host()
    return n, f"this host's {n} cores"


def place_ranks(launcher: str, ranks: int, hostfile: str | Path | None,
                env: Mapping[str, str]) -> Hostfile | None:
    """Check that ``ranks`` ranks fit where ``launcher`` puts them and that it is on PATH.

    Args:
        launcher: ``mpirun``, ``horovodrun`` or ``srun`` (already checked).
        ranks: the most ranks one launch starts.
        hostfile: ``HOST slots=N`` file (mpirun and horovodrun only).
        env: environment to judge SLURM and PATH by.

    Returns:
        The parsed hostfile, or None without one.

    Raises:
        HvdscaleError: one clear message for the first problem.
    """
    hosts = None
    if launcher == "torchrun" and hostfile is not None:
        from hvdscale.study.sweep.torchrun import torchrun_prefix

        torchrun_prefix(ranks, Path(hostfile))  # refuses it, saying what to do instead
    if hostfile is not None:
        if launcher == "srun":
            raise HvdscaleError("--hostfile does not apply to srun, which places ranks on the "
                                "SLURM allocation; use --launcher mpirun or horovodrun with it")
        hosts = parse_hostfile(hostfile)
        hosts.check_ranks(ranks)
    elif launcher != "srun" or env.get("SLURM_JOB_ID"):
        # (srun outside an allocation asks SLURM for one, which decides where the ranks fit.)
        slots, where = _local_slots(launcher, env)
        if ranks > slots:
            fix = (f"pass --hostfile with enough slots (e.g. 'localhost slots={ranks}' to "
                   "oversubscribe on purpose)")
            if "SLURM" in where:
                fix = "ask for more tasks (sbatch --ntasks) or lower --np"
            raise HvdscaleError(f"--np {ranks} is more ranks than {where}; {fix}")
    if launcher == "torchrun":  # run as `python -m torch.distributed.run`: torch must import
        from hvdscale.study.sweep.torchrun import check_torchrun

        check_torchrun()
    elif shutil.which(launcher, path=env.get("PATH")) is None:
        raise HvdscaleError(f"launcher {launcher!r} is not on PATH")
    return hosts


def split_launcher_args(launcher_args: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Extra launcher arguments as a tuple: a shell-quoted string is split, a list kept."""
    try:
        return tuple(shlex.split(launcher_args) if isinstance(launcher_args, str)
                     else launcher_args)
    except ValueError as e:
        raise HvdscaleError(f"--launcher-args {launcher_args!r} cannot be split: {e}") from None


# --- the launcher's command line and environment ------------------------------------------------

def _exports(env: Mapping[str, str]) -> list[str]:
    names = sorted(k for k in env if k in EXPORT_VARS or k.startswith(EXPORT_PREFIXES))
    return [a for k in names for a in ("-x", k)]


def launcher_prefix(launcher: str, ranks: int, hostfile_path: Path | None = None,
                    network_interfaces: str | None = None, launcher_args: tuple[str, ...] = (),
                    gloo: bool = False, env: Mapping[str, str] | None = None) -> list[str]:
    """The launcher part of a command line that starts ``ranks`` copies of a program.

    Shared by the sweep's points and by other multi-rank commands (``hvdscale commbench``).

    Args:
        launcher: ``mpirun``, ``horovodrun`` or ``srun``.
        ranks: number of ranks.
        hostfile_path: a clean ``HOST slots=N`` hostfile (see ``write_hostfile``).
        network_interfaces: NIC name(s) the ranks talk over.
        launcher_args: extra launcher arguments, placed last.
        gloo: horovodrun only: Horovod's Gloo controller (no MPI job) instead of ``--mpi``.
        env: environment whose variables mpirun forwards with ``-x``.
    """
    env = os.environ if env is None else env
    n = str(ranks)
    nics = network_interfaces
    if launcher == "mpirun":
        # Same placement as horovodrun's: no binding (each rank's compute, Horovod and MPI
        # progress threads share the host's cores), ranks filled host by host.
        cmd = ["mpirun", "-np", n, "--bind-to", "none", "--map-by", "slot"]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        if hostfile_path is not None:
            cmd += ["--hostfile", str(hostfile_path)]
        if nics:
            cmd += ["--mca", "btl_tcp_if_include", nics, "--mca", "oob_tcp_if_include", nics]
        cmd += _exports(env)
    elif launcher == "horovodrun":
        # --mpi: the ps strategy and the harness's barriers need an MPI job (not --gloo).
        cmd = ["horovodrun", "--gloo" if gloo else "--mpi", "-np", n]
        if hostfile_path is not None:
            cmd += ["-hostfile", str(hostfile_path)]
        else:
            cmd += ["-H", f"localhost:{n}"]
        if nics:
            # Without it horovodrun probes every host for a common routable interface.
            cmd += ["--network-interfaces", nics]
    elif launcher == "torchrun":
        from hvdscale.study.sweep.torchrun import torchrun_prefix

        cmd = torchrun_prefix(ranks, hostfile_path)[:-1]  # --no-python last, after the extras
        return [*cmd, *launcher_args, "--no-python"]
    else:
        cmd = ["srun", "--mpi=pmix", "-n", n, "--kill-on-bad-exit=1", "--cpu-bind=none"]
    return [*cmd, *launcher_args]


def launch_line(launcher: str, ranks: int, program: list[str],
                hostfile_path: Path | None = None, network_interfaces: str | None = None,
                launcher_args: tuple[str, ...] = (), env: Mapping[str, str] | None = None
                ) -> list[str]:
    """The whole command line that starts ``ranks`` copies of ``program``: the one place a
    launch line is built (the sweep's points, ``hvdscale commbench``'s and the benches' runs).

    Arguments as ``launcher_prefix``'s; ``program`` is what every rank executes.
    """
    return [*launcher_prefix(launcher, ranks, hostfile_path, network_interfaces, launcher_args,
                             env=env), *program]


def rank_command(verb: str, target: str | Path, out: str | Path,
                 sets: tuple[str, ...] | list[str] = (), progress_every: float | None = None,
                 quiet: bool = False) -> list[str]:
    """What every rank of a launch executes: the one builder of that command line.

    Args:
        verb: ``run`` (one point: ``target`` is its config) or ``run-points`` (a shared
            launch: ``target`` is its plan file).
        target: the config or plan file.
        out: the results directory.
        sets: ``--set`` overrides, in order.
        progress_every: seconds between the ranks' progress lines (None: the run's default).
        quiet: no progress lines at all.
    """
    # The interpreter running the sweep runs the ranks too (same install on every host).
    cmd = [sys.executable, "-m", "hvdscale", verb, str(target),
           *(a for s in sets for a in ("--set", s))]
    if quiet:
        cmd.append("--quiet")
    if progress_every is not None:
        cmd += ["--progress-every", f"{progress_every:g}"]
    return [*cmd, "--out", str(out)]


def launch_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment of the launcher process: unbuffered ranks, root allowed when root."""
    out = dict(os.environ if env is None else env)
    out.setdefault("PYTHONUNBUFFERED", "1")
    if os.geteuid() == 0:
        # horovodrun's own `mpirun --version` probe and nested launches need these too.
        out.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        out.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return out


# --- what a launch left behind ------------------------------------------------------------------

def read_out(out: Path) -> list[Record]:
    """The records in the results directory ``out``, typed (none yet: an empty list)."""
    return read_records(results_path(out)) if results_path(out).exists() else []


# Open MPI's word that a node's daemon is gone (the node died or its network failed); mpirun
# under SLURM and horovodrun both report a dead node this way.
_LOST_DAEMON = re.compile(r"Remote daemon: *\[\[[\d,]+\],\d+\] on node ([\w.-]+)")


def error_summary(stderr: str, max_lines: int = 3, stdout: str = "") -> str:
    """The last telling lines of a failed launch's stderr, joined on one line.

    A launcher that fails before any rank starts (horovodrun's host checks) may say why on its
    stdout only: ``stdout`` is read when stderr has nothing telling.
    """
    if lost := list(dict.fromkeys(_LOST_DAEMON.findall(stderr))):
        return (f"lost node {', '.join(lost)}: Open MPI lost contact with its daemon there "
                "(the node died or its network failed)")
    lines = [ln.strip() for ln in stderr.splitlines()]
    lines = [re.sub(r"^\[\d+,\d+\]<std(err|out)>:", "", ln).strip() for ln in lines]
    lines = [ln for ln in lines if ln and not _BOILERPLATE.match(ln)]
    # hvdscale's fail-fast prints "hvdscale: error: ..." once; that line says it all.
    errs = [ln for ln in lines if "hvdscale: error" in ln or "Error:" in ln or "error:" in ln]
    pick = errs[-1:] if errs else lines[-max_lines:]
    if not pick and stdout:
        return error_summary(stdout, max_lines)
    return " / ".join(pick)[:500] or "(no stderr)"


# --- the launch line from a shell -------------------------------------------------------------

def _parse(argv: list[str] | None) -> Any:
    import argparse

    p = argparse.ArgumentParser(
        prog="python -m hvdscale.study.sweep.launcher",
        description="Start N ranks of PROGRAM with the sweep's launch line and environment "
                    "(what bench/run_all.sh launches its MPI benches through).")
    p.add_argument("--np", type=int, required=True, help="number of ranks (>= 1)")
    p.add_argument("--launcher", default="mpirun", help=f"one of {', '.join(LAUNCHERS)}")
    p.add_argument("--launcher-args", default="",
                   help="extra launcher arguments, one string (--launcher-args=--oversubscribe)")
    p.add_argument("--print", action="store_true", help="print the line instead of running it")
    p.add_argument("program", nargs=argparse.REMAINDER, help="-- then what every rank runs")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Print, or replace this process with, the launch line of ``-- PROGRAM...`` on N ranks."""
    args = _parse(argv)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    try:
        check_launcher(args.launcher)
        if args.np < 1:
            raise HvdscaleError(f"--np must be >= 1 (got {args.np})")
        if not program:
            raise HvdscaleError("no program to launch: give it after --")
        cmd = launch_line(args.launcher, args.np, program,
                          launcher_args=split_launcher_args(args.launcher_args))
        if args.print:
            print(shlex.join(cmd))
            return 0
        if shutil.which(cmd[0]) is None:
            raise HvdscaleError(f"launcher {cmd[0]!r} is not on PATH")
    except HvdscaleError as e:
        print(f"hvdscale: error: {e}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    os.execvpe(cmd[0], cmd, launch_env())  # the launcher's exit status is this command's


if __name__ == "__main__":
    raise SystemExit(main())
