"""``hvdscale commbench``: allreduce and parameter-server exchange times by message size.

One job per module: ``sizes`` (the options' sizes and transports), ``model`` (busbw definitions,
fits, link parameters), ``rank`` (what each launched rank runs: ``python -m
hvdscale.study.commbench``), ``launch`` (the parent: launch, merge) and ``output`` (table, plot,
files, reading a result back).
"""

from hvdscale.study.commbench.launch import CommbenchSpec, merge, run_commbench
from hvdscale.study.commbench.model import (
    allreduce_factor,
    fit_alpha_beta,
    link_parameters,
    ps_factor,
    ps_phase,
    refit,
    summarize_points,
)
from hvdscale.study.commbench.output import load_commbench, plot, table, write_outputs
from hvdscale.study.commbench.sizes import TRANSPORTS, human, parse_sizes, parse_transports

__all__ = ["TRANSPORTS", "CommbenchSpec", "allreduce_factor", "fit_alpha_beta", "human",
           "link_parameters", "load_commbench", "merge", "parse_sizes", "parse_transports",
           "plot", "ps_factor", "ps_phase", "refit", "run_commbench", "summarize_points", "table",
           "write_outputs"]
