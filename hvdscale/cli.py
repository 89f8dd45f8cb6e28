"""``hvdscale`` command line: run, report, and the version of the stack it runs on."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import hvdscale
from hvdscale.errors import HvdscaleError


def _version_text() -> str:
    from hvdscale.provenance import versions

    v = versions()
    return (f"hvdscale {hvdscale.__version__}\n"
            f"python {v['python']}\n"
            f"torch {v['torch'] or 'not installed'}\n"
            f"tensorflow {v['tensorflow'] or 'not installed'}\n"
            f"horovod {v['horovod'] or 'not installed'}\n"
            f"mpi4py {v['mpi4py'] or 'not installed'}\n"
            f"MPI library: {v['mpi'] or 'not found'}")


class _VersionAction(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kw: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print versions and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kw: object) -> None:
        print(_version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hvdscale", description=hvdscale.__doc__)
    p.add_argument("--version", action=_VersionAction)
    sub = p.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("run", help="train and measure one configuration on the launched ranks",
                       description="Run under mpirun/horovodrun/srun (or alone as one rank).")
    r.add_argument("config", help="YAML run config")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. strategy.name=independent (repeatable)")
    r.add_argument("--out", default="results", help="results directory (default: results/)")

    c = sub.add_parser("config", help="print the resolved config as YAML (no training)")
    c.add_argument("config")
    c.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")

    rep = sub.add_parser("report", help="scaling tables (and plots) from recorded runs")
    rep.add_argument("results", help="a results directory or results.jsonl file")
    rep.add_argument("--plot", action="store_true", help="write PNG plots beside the tables")
    rep.add_argument("--out", default=None, help="where report.md, report.csv and plots go "
                     "(default: the results directory)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``hvdscale`` console script."""
    args = build_parser().parse_args(argv)
    if args.cmd == "run":
        return _cmd_run(args)
    try:
        if args.cmd == "config":
            import yaml

            from hvdscale.config import load_config, to_dict

            print(yaml.safe_dump(to_dict(load_config(args.config, args.set)), sort_keys=False),
                  end="")
            return 0
        if args.cmd == "report":
            from hvdscale.report import write_report

            print(write_report(args.results, args.out, plot=args.plot), end="")
            return 0
    except HvdscaleError as e:
        print(f"hvdscale: error: {e}", file=sys.stderr)
        return 2
    return 1  # pragma: no cover - argparse rejects other commands


def _cmd_run(args: argparse.Namespace) -> int:
    from hvdscale.world import launch_rank, report_and_abort

    rank = launch_rank()
    world = None
    try:
        from hvdscale.config import load_config

        cfg = load_config(args.config, args.set)
        from hvdscale import runner

        record = runner.run(cfg, args.out, argv=sys.argv)
        if record is not None:
            print(_one_line(record), flush=True)
        return 0
    except BaseException as e:
        if isinstance(e, SystemExit) and not e.code:
            return 0
        if isinstance(e, KeyboardInterrupt):
            print(f"hvdscale: rank {rank} interrupted", file=sys.stderr)
        world = _current_world()
        report_and_abort(e, world, rank)
        return 1


def _current_world() -> object | None:
    """The world if MPI or Horovod is up (so abort reaches every rank), else None."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        from hvdscale.world import MPIWorld

        return MPIWorld()
    hvd = sys.modules.get("horovod.torch")
    if hvd is not None:
        try:
            if hvd.is_initialized():
                from hvdscale.world import HorovodWorld

                return HorovodWorld()
        except Exception:
            return None
    return None


def _one_line(rec: dict) -> str:
    k = rec["key"]
    return (f"hvdscale: {k['model']}/{rec['config']['framework']}/{k['rnn_impl']}/{k['strategy']} "
            f"ranks={rec['ranks']} words/s={rec['words_per_s']:.1f} "
            f"step={rec['step_time']['median'] * 1e3:.1f}ms "
            f"(+-{rec['step_time']['jitter'] * 1e3:.1f}) loss={rec['final_loss']:.4f}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
