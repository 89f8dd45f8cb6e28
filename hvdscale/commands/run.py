"""``hvdscale run``: train and measure one configuration on the launched ranks."""

from __future__ import annotations

import argparse
import sys

from hvdscale.commands import common

NAME = "run"
# Runs on every rank of a job: the caller (cli) ends the whole job on any error, so no rank
# waits in a collective for one that has failed.
ON_EVERY_RANK = True


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The ``run`` parser."""
    r = subparsers.add_parser(
        NAME, help="train and measure one configuration on the launched ranks",
        description="Run under mpirun/horovodrun/srun (or alone as one rank).")
    common.add_config(r)
    common.add_set(r, "override a config key, e.g. strategy.name=independent (repeatable)")
    common.add_out(r)
    common.add_progress(r)
    return r


def handle(args: argparse.Namespace) -> int:
    """Train on this rank; rank 0 prints the one-line summary. Errors propagate to the caller."""
    from hvdscale.core.progress import ProgressSettings, start_progress
    from hvdscale.core.world import launch_rank

    progress = start_progress(ProgressSettings(args.progress_every, args.quiet), launch_rank())
    try:
        from hvdscale.config import load_config

        cfg = load_config(args.config, args.set)
        from hvdscale.train import runner

        record = runner.run(cfg, args.out, argv=sys.argv, progress=progress)
    finally:
        progress.close()  # the summary line (or the error) takes the live line's place
    if record is not None:  # rank 0: the run in one line
        k, fw = record.key, record.config.framework
        print(f"hvdscale: {k['model']}/{fw}/{k['rnn_impl']}/{k['strategy']} "
              f"ranks={record.ranks} words/s={record.words_per_s:.1f} "
              f"step={record.step_median_s * 1e3:.1f}ms "
              f"(+-{record.step_time.jitter * 1e3:.1f}) loss={record.final_loss:.4f}",
              flush=True)
    return 0

