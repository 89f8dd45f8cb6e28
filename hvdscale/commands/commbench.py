"""``hvdscale commbench``: allreduce / parameter-server time and bandwidth by message size."""

from __future__ import annotations

import argparse

from hvdscale.commands import common

NAME = "commbench"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The ``commbench`` parser."""
    cb = subparsers.add_parser(
        NAME, help="allreduce / parameter-server time and bandwidth by message size",
        description="Launches itself (mpirun, and horovodrun --gloo for horovod-gloo) and "
        "writes DIR/commbench.json, commbench.md and commbench.png.")
    cb.add_argument("--np", type=int, required=True, help="ranks")
    cb.add_argument("--sizes", default="4B..256MB",
                    help="4B..256MB (doubling; ..256MB:x4 for x4 steps) or 1MB,16MB "
                    "(binary units; default 4B..256MB)")
    cb.add_argument("--transports", default="horovod-mpi,horovod-gloo,mpi4py,ps",
                    help="comma-separated subset of horovod-mpi,horovod-gloo,mpi4py,ps,p2p "
                    "(p2p: a ping-pong between ranks 0 and 1; default: all but p2p)")
    cb.add_argument("--repeats", type=int, default=20,
                    help="timed repeats per size (fewer above 4 MB, at least 5; default 20)")
    cb.add_argument("--warmup", type=int, default=2, help="untimed repeats first (default 2)")
    cb.add_argument("--ps-servers", type=int, default=1, help="parameter servers (default 1)")
    cb.add_argument("--ps-placement", default="colocated", help="colocated or dedicated")
    common.add_hostfile(cb)
    cb.add_argument("--network-interfaces", default=None, metavar="NIC",
                    help="NIC(s) the ranks talk over (Open MPI's TCP BTL and OOB, Horovod's "
                    "Gloo), e.g. hvd0")
    common.add_timeout(cb, 600.0, "limit per job in s", metavar=None)
    common.add_out(cb, "commbench", "output directory (default commbench/)")
    common.add_no_plot(cb, "no PNG")
    return cb


def handle(args: argparse.Namespace) -> int:
    """Launch the benchmark jobs, write the outputs, print the table."""
    from hvdscale.study.commbench import CommbenchSpec, run_commbench, table

    spec = CommbenchSpec(args.np, args.sizes, args.transports, args.repeats, args.warmup,
                         args.ps_servers, args.ps_placement, args.timeout,
                         args.network_interfaces)
    res = run_commbench(spec, args.out, args.hostfile, plot=not args.no_plot)
    print(table(res), end="")
    return 0
