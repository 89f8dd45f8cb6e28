"""One ``hvdscale run`` launched alone, exactly as the sweep launches one of its points.

For scripts that time a config outside a sweep (the benches in bench/): the same launcher line
(``launch_line``: ``--bind-to none --map-by slot``, the same ``-x`` exports), the same launcher
environment (``launch_env``), and the record read back with the records reader, so a figure
measured here and a sweep's figure of the same point are measured under the same rank
placement.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hvdscale.errors import HvdscaleError
from hvdscale.records.run import RunRecord
from hvdscale.study.sweep import process
from hvdscale.study.sweep.launcher import (
    error_summary,
    launch_env,
    launch_line,
    rank_command,
    read_out,
)


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
    cmd = launch_line("mpirun", ranks, rank_command("run", config, out, sets, quiet=quiet),
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
    """Launch one run (see ``single_run_line``; started and held to ``how.timeout_s`` by
    ``hvdscale.study.sweep.process``) and return the record it appended to ``out``.

    Raises:
        HvdscaleError: the launch failed, ran past its deadline (then it and every rank were
            ended) or wrote no record; one line, with the telling stderr line.
    """
    cmd, full = single_run_line(ranks, config, out, sets, how.quiet, how.launcher_args, how.env)
    before = len(read_out(Path(out)))
    with tempfile.TemporaryDirectory(prefix="hvdscale-run-") as tmp:
        logs = (Path(tmp) / "stdout", Path(tmp) / "stderr")
        ended = process.start(cmd, full, logs, how.timeout_s, cwd=how.cwd)
        stdout, stderr = (f.read_text(errors="replace") for f in logs)
    new = [r for r in read_out(Path(out))[before:] if isinstance(r, RunRecord)]
    if ended.timed_out:
        raise HvdscaleError(f"run of {config} at np={ranks} {ended.why}")
    if ended.rc != 0 or not new:
        raise HvdscaleError(f"run of {config} at np={ranks} failed (exit {ended.rc}): "
                            f"{error_summary(stderr, stdout=stdout)}")
    return new[-1]
