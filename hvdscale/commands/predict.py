"""``hvdscale predict``: step time, words/s and efficiency per strategy and rank count."""

from __future__ import annotations

import argparse

from hvdscale.commands import common

NAME = "predict"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The ``predict`` parser."""
    pr = subparsers.add_parser(
        NAME, help="predict step time, words/s and efficiency per strategy and rank count",
        description="From the model's gradient bytes, the compute time (records or a given "
        "rate) and the network (commbench or latency/bandwidth), unfitted; or fitted to your "
        "own small runs with --fit RESULTS. See hvdscale/study/predict/.")
    common.add_config(pr)
    common.add_set(pr)
    pr.add_argument("--ranks", default="1,2,4,...,512", help="e.g. 1,2,4,...,512 (default)")
    pr.add_argument("--comm", default=None, metavar="DIR", help="a commbench output directory")
    pr.add_argument("--transport", default="", help="commbench allreduce transport to use "
                    "(default horovod-mpi, else horovod-gloo, else mpi4py)")
    pr.add_argument("--latency", default=None, help="per-message latency, e.g. 5us")
    pr.add_argument("--bandwidth", default=None, help="link bandwidth, e.g. 25Gbit")
    pr.add_argument("--mem-bandwidth", default=None,
                    help="server memory bandwidth for the PS update, e.g. 10GB/s (with "
                    "--latency/--bandwidth; commbench measures it)")
    pr.add_argument("--records", default=None, metavar="RESULTS",
                    help="results directory: compute time from its 1-rank runs, and "
                    "predicted vs measured for every recorded point")
    pr.add_argument("--single-rate", type=float, default=None, metavar="WORDS_PER_S",
                    help="compute time from one device's words/s instead of records")
    pr.add_argument("--compute-ms", type=float, default=None,
                    help="compute time per step at the config's batch instead of records")
    pr.add_argument("--scaling", default="weak,strong", help="weak, strong or weak,strong")
    pr.add_argument("--backward-fraction", type=float, default=2 / 3,
                    help="share of compute in backward, for overlap (default 0.67)")
    pr.add_argument("--servers", type=int, default=None,
                    help="dedicated PS servers (default strategy.ps.num_servers)")
    pr.add_argument("--fit", default=None, metavar="RESULTS",
                    help="fit the model to the recorded points of one experiment (np=1,2,... "
                    "per strategy) instead of using a network and a rate; prints the chosen "
                    "family, its parameters with standard errors, each point's held-out error "
                    "and predictions with a 95 %% interval")
    pr.add_argument("--fit-link", default=None, metavar="FROM,TO",
                    help="with --fit: carry the fit from the link it was measured on to another, "
                    "each a commbench result directory (its communication scaled by the two "
                    "links' seconds per byte)")
    pr.add_argument("--plot", default=None, metavar="PNG", help="write the efficiency plot "
                    "(with --fit: measured points, the fit and its interval)")
    common.add_json(pr, "print JSON instead of tables")
    return pr


def handle(args: argparse.Namespace) -> int:
    """Predict and print the tables (or JSON)."""
    from hvdscale.study import predict

    spec = predict.PredictSpec(
        args.ranks, args.comm, args.latency, args.bandwidth, args.mem_bandwidth, args.records,
        args.single_rate, args.compute_ms, args.scaling, args.backward_fraction, args.servers,
        args.transport, args.fit, args.fit_link)
    res = predict.run_predict(args.config, args.set, spec, args.plot)
    print(predict.dumps(res) if args.json else predict.render(res), end="")
    return 0
