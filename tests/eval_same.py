"""Shared by tests/mpi and tests/mpi_tf: the same weights give the same evaluation loss under
every strategy (the evaluation of hvdscale.train.evaluate)."""

from __future__ import annotations

from typing import Any

from hvdscale.corpora.evalset import make_eval_set
from hvdscale.frameworks import load_framework
from hvdscale.strategies import make_strategy
from hvdscale.train.evaluate import Evaluator, eval_loss_sum
from tests.exactness import adapter, config


def check_same_eval_loss(framework: str, strategy: str, source: str, world: Any) -> None:
    """Set up ``strategy`` (its initial parameters shared), evaluate through the Evaluator, and
    compare with one process evaluating a fresh adapter of the same seed (the same weights)."""
    extra = ["data.synthetic.kind=mapped"] if source == "mapped" else [
        "model.kind=lm", "data.synthetic.kind=markov"]
    cfg = config(framework, strategy, *extra)
    fw = load_framework(framework)
    strat = make_strategy(cfg.strategy, world, fw.HorovodStrategy,
                          getattr(fw, "make_native_strategy", None))
    mine = adapter(cfg)
    strat.setup(mine)
    evalset = make_eval_set(cfg.data, cfg.model.data_kind, cfg.model.src_vocab, cfg.model.tgt_vocab,
                            16)
    loss, extra_sums = Evaluator(world, mine, evalset, strat.computes).evaluate([1.0])
    strat.finish()
    assert extra_sums[0] == world.size  # the counters ride in the same allreduce
    ref = eval_loss_sum(adapter(cfg), evalset) / evalset.tokens
    assert loss == ref, (strategy, loss, ref)  # bitwise: one rank's sum, zeros added
    assert len(set(world.allgather(loss))) == 1
