"""One module per ``hvdscale`` subcommand: its parser and its handler.

Each module has ``NAME``, ``add_parser(subparsers)`` and ``handle(args) -> int``; ``COMMANDS``
is their order in ``hvdscale --help``.
"""

from hvdscale.commands import (
    backtest,
    batch,
    commbench,
    config,
    data,
    doctor,
    fusion,
    gemm,
    hostfile,
    predict,
    profile,
    report,
    run,
    run_points,
    sweep,
    timeline,
)

COMMANDS = (run, run_points, config, sweep, fusion, timeline, hostfile, gemm, profile, batch,
            commbench, predict, backtest, report, data, doctor)
