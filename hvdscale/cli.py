"""``hvdscale`` command line: builds the parser from the command table and dispatches."""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

import hvdscale
from hvdscale.commands import COMMANDS, common
from hvdscale.errors import HvdscaleError


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one subparser per module of :data:`COMMANDS`, in that order."""
    p = argparse.ArgumentParser(prog="hvdscale", description=hvdscale.__doc__)
    p.add_argument("--version", action=common.VersionAction)
    sub = p.add_subparsers(dest="cmd", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``hvdscale`` console script."""
    args = build_parser().parse_args(argv)
    command = {c.NAME: c for c in COMMANDS}[args.cmd]
    if getattr(command, "ON_EVERY_RANK", False):
        rc = _on_every_rank(command, args)
        if argv is None:  # this process's own command line: no interpreter teardown
            from hvdscale.core.startup import exit_now

            exit_now(rc)
        return rc
    try:
        return command.handle(args)
    except HvdscaleError as e:
        print(f"hvdscale: error: {e}", file=sys.stderr)
        return 2


def _on_every_rank(command: ModuleType, args: argparse.Namespace) -> int:
    """Run a command that every rank of a job runs: any failure ends the whole job.

    One failed rank must not leave the others waiting in a collective, so the error is printed
    once naming the rank and the job is aborted (report_and_abort); Ctrl-C says so, no traceback.
    """
    from hvdscale.core.supervise import abort_job, report_and_abort
    from hvdscale.core.world import launch_rank

    rank = launch_rank()
    try:
        return command.handle(args)
    except BaseException as e:
        if isinstance(e, SystemExit) and not e.code:
            return 0
        if isinstance(e, KeyboardInterrupt):
            # Ctrl-C is the user's own doing: say so (progress said which step), no traceback.
            print(f"hvdscale: rank {rank} interrupted", file=sys.stderr, flush=True)
            abort_job(130)
        report_and_abort(e, rank)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
