"""Arguments several subcommands share, declared once: config, --set, --out, --timeout, ..."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import hvdscale

RESULTS_HELP = "results directory (default: results/)"
FOR_EVERY_POINT = "override a config key for every point (repeatable)"
LAUNCHERS = "{mpirun,horovodrun,srun}"
JSON_RECORD = "print the record as JSON instead"


def version_text() -> str:
    """What ``hvdscale --version`` prints: this package and the stack it runs on."""
    from hvdscale.records.provenance import versions

    v = versions()
    return (f"hvdscale {hvdscale.__version__}\n"
            f"python {v['python']}\n"
            f"torch {v['torch'] or 'not installed'}\n"
            f"tensorflow {v['tensorflow'] or 'not installed'}\n"
            f"horovod {v['horovod'] or 'not installed'}\n"
            f"mpi4py {v['mpi4py'] or 'not installed'}\n"
            f"MPI library: {v['mpi'] or 'not found'}")


class VersionAction(argparse.Action):
    """``--version``: print :func:`version_text` and exit (the versions are read only then)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kw: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print versions and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kw: object) -> None:
        print(version_text())
        parser.exit()


def seconds(text: str) -> float:
    """argparse type: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds (got {text!r})")
    return value


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def duration(text: str) -> float:
    """argparse type: a positive time, in seconds or with a unit: ``90``, ``90s``, ``5m``,
    ``1.5h``."""
    t = text.strip().lower()
    scale = _UNITS.get(t[-1:], None)
    try:
        value = float(t[:-1] if scale else t) * (scale or 1.0)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise argparse.ArgumentTypeError(
            f"must be a positive time, e.g. 90s, 5m or 1h (got {text!r})")
    return value


def add_config(parser: argparse.ArgumentParser, help: str | None = "YAML run config") -> None:
    """The positional YAML run config."""
    parser.add_argument("config", help=help)


def add_set(parser: argparse.ArgumentParser, help: str | None = None) -> None:
    """``--set KEY=VALUE`` (repeatable): config overrides."""
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=help)


def add_out(parser: argparse.ArgumentParser, default: str | None = "results",
            help: str | None = RESULTS_HELP) -> None:
    """``--out``: where records and reports go."""
    parser.add_argument("--out", default=default, help=help)


def add_timeout(parser: argparse.ArgumentParser, default: float = 900.0,
                help: str = "time limit of one point in seconds (default: 900)",
                metavar: str | None = "S") -> None:
    """``--timeout``: a time limit in seconds."""
    parser.add_argument("--timeout", type=float, default=default, metavar=metavar, help=help)


def add_progress(parser: argparse.ArgumentParser) -> None:
    """``--progress-every S`` and ``--quiet``: rank 0's progress report of a run on the ranks
    (``hvdscale run``, ``hvdscale run-points``)."""
    parser.add_argument("--progress-every", type=seconds, default=10.0, metavar="S",
                        help="rank 0's progress: a plain line every S seconds when output is a "
                        "file or pipe (default: 10); on a terminal it is one live line")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress report; only the final summary line")


def add_no_plot(parser: argparse.ArgumentParser, help: str) -> None:
    """``--no-plot``: skip the PNGs."""
    parser.add_argument("--no-plot", action="store_true", help=help)


def add_launcher(parser: argparse.ArgumentParser, help: str | None = None) -> None:
    """``--launcher``: how each point is started (default mpirun)."""
    parser.add_argument("--launcher", default="mpirun", metavar=LAUNCHERS, help=help)


def add_hostfile(parser: argparse.ArgumentParser,
                 help: str = "'HOST slots=N' hostfile") -> None:
    """``--hostfile``: a 'HOST slots=N' hostfile for the launcher."""
    parser.add_argument("--hostfile", default=None, help=help)


def add_json(parser: argparse.ArgumentParser, help: str = JSON_RECORD) -> None:
    """``--json``: machine-readable output instead of tables."""
    parser.add_argument("--json", action="store_true", help=help)
