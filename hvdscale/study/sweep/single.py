"""One ``hvdscale run`` launched alone, exactly as the sweep launches one of its points.

For scripts that time a config outside a sweep (the benches in bench/): the same launcher line
(``launch_line``: ``--bind-to none --map-by slot``, the same ``-x`` exports), the same launcher
environment (``launch_env``), and the record read back with the records reader, so a figure
measured here and a sweep's figure of the same point are measured under the same rank
placement.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hvdscale.errors import HvdscaleError
from hvdscale.records.run import RunRecord
from hvdscale.study.sweep.launcher import error_summary, launch_env, launch_line, read_out


def run_program(config: str | Path, out: str | Path, sets: tuple[str, ...] | list[str] = (),
                quiet: bool = False) -> list[str]:
    """The ``hvdscale run`` command every rank executes, in the sweep's form (``run_argv``:
    this interpreter, the overrides, then ``--out``)."""
    return [sys.executable, "-m", "hvdscale", "run", str(config),
            *(a for s in sets for a in ("--set", s)), *(["--quiet"] if quiet else []),
            "--out", str(out)]


def single_run_line(ranks: int, config: str | Path, out: str | Path,
                    sets: tuple[str, ...] | list[str] = (), quiet: bool = False,
                    launcher_args: tuple[str, ...] = (),
                    env: Mapping[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The launch line and launcher environment of one ``mpirun``-launched run.

    Args:
        ranks: number of ranks.
        config: the run's config file.
        out: its results directory.
        sets: ``--set`` overrides, in order.
        quiet: pass ``--quiet`` to the run.
        launcher_args: extra ``mpirun`` arguments (e.g. ``--oversubscribe``), placed last.
        env: variables added to this process's environment for the launch (e.g. a
            ``PYTHONPATH``); mpirun forwards the usual ones with ``-x``.
    """
    given = {**os.environ, **(env or {})}
    # Exports judged on the environment as given, as the sweep judges them (launch_command).
    cmd = launch_line("mpirun", ranks, run_program(config, out, sets, quiet),
                      launcher_args=launcher_args, env=given)
    return cmd, launch_env(given)


@dataclass(frozen=True)
class RunLaunch:
    """How ``launch_run`` starts its run, beyond the run itself.

    Attributes:
        quiet: pass ``--quiet`` to the run (no progress lines).
        launcher_args: extra ``mpirun`` arguments (e.g. ``--oversubscribe``), placed last.
        env: variables added to this process's environment for the launch.
        timeout_s: seconds before the launch is killed.
        cwd: the directory the launcher starts in (None: this one).
    """

    quiet: bool = False
    launcher_args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    timeout_s: float = 600
    cwd: str | Path | None = None


def launch_run(ranks: int, config: str | Path, out: str | Path,
               sets: tuple[str, ...] | list[str] = (),
               how: RunLaunch = RunLaunch()) -> RunRecord:
    """Launch one run (see ``single_run_line``) and return the record it appended to ``out``.

    Raises:
        HvdscaleError: the launch failed or wrote no record (with the telling stderr line).
    """
    cmd, full = single_run_line(ranks, config, out, sets, how.quiet, how.launcher_args, how.env)
    before = len(read_out(Path(out)))
    proc = subprocess.run(cmd, env=full, cwd=how.cwd, capture_output=True, text=True,
                          timeout=how.timeout_s, stdin=subprocess.DEVNULL)
    new = [r for r in read_out(Path(out))[before:] if isinstance(r, RunRecord)]
    if proc.returncode != 0 or not new:
        raise HvdscaleError(f"run of {config} at np={ranks} failed (exit {proc.returncode}): "
                            f"{error_summary(proc.stderr, stdout=proc.stdout)}")
    return new[-1]
