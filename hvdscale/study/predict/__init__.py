"""``hvdscale predict``: step time, words/s and efficiency past the ranks measured here.

Inputs (``inputs``): the model's gradient bytes per tensor (from the config's framework, shapes
only), the compute time per step and how it grows with the per-rank batch (``compute``: fitted
on 1-worker records, or given as a single-device rate), and the network (a commbench result, or
a latency and a bandwidth). ``cost`` holds the communication costs, ``forecast`` the step time
per strategy and rank count and the validation against records, ``output`` the tables, plot and
JSON, ``run`` the command from its options. Fitted to measured points: ``families`` (the cost
formulas and which strategy takes which), ``fit`` (least squares, held-out error, the choice),
``ownfit`` (one's own records, via ``hvdscale.study.report.decompose``), ``tables`` and ``backtest``
(the public scaling tables under ``tables/``), ``fitoutput`` (its tables and plot).
"""

from hvdscale.study.predict.compute import ComputeModel
from hvdscale.study.predict.cost import fuse, ps_time, ring_cost, ring_exposed
from hvdscale.study.predict.forecast import predict, validate
from hvdscale.study.predict.inputs import (
    Network,
    gradient_bytes,
    parse_bandwidth,
    parse_latency,
    parse_ranks,
)
from hvdscale.study.predict.output import dumps, plot, render
from hvdscale.study.predict.run import PredictSpec, run_predict

__all__ = ["ComputeModel", "Network", "PredictSpec", "dumps", "fuse", "gradient_bytes",
           "parse_bandwidth", "parse_latency", "parse_ranks", "plot", "predict", "ps_time",
           "render", "ring_cost", "ring_exposed", "run_predict", "validate"]
