"""Shared by the MPI test folders: the gradient-noise probe (issue 33) runs at every
evaluation of a whole ``hvdscale run`` and leaves the trained weights bit-identical."""

from __future__ import annotations

import tempfile
from typing import Any

from hvdscale.config import load_config
from hvdscale.train.runner import run

TINY_LM = ["model.kind=lm", "model.embed_dim=16", "model.hidden_size=16", "model.src_vocab=40",
           "model.tgt_vocab=40", "data.batch_size=8", "data.synthetic.kind=markov",
           "data.synthetic.max_len=12", "data.synthetic.sentences_per_rank=64",
           "data.synthetic.eval_sentences=16", "measure.warmup_steps=1", "measure.steps=6",
           "measure.eval_every=2"]


def _run(world: Any, framework: str, strategy: str, noise: bool, extra: tuple[str, ...]) -> Any:
    out = world.bcast(tempfile.mkdtemp(prefix="hvdscale-noise-") if world.rank == 0 else None)
    return run(load_config(None, [*TINY_LM, f"framework={framework}",
                                   f"strategy.name={strategy}",
                                   f"measure.noise_scale={str(noise).lower()}", *extra]), out)


def check_probe_leaves_training_alone(framework: str, strategy: str, world: Any,
                                      *extra: str, contributing: int | None = None) -> None:
    """Train with the probe on and off: the same fingerprints bit for bit; with it on, one
    point per evaluation (null with its why when fewer than two ranks compute)."""
    on = _run(world, framework, strategy, True, extra)
    off = _run(world, framework, strategy, False, extra)
    if world.rank != 0:
        return
    assert on.status == "ok" and off.status == "ok"
    assert on.fingerprints == off.fingerprints, (on.fingerprints, off.fingerprints)
    ns, ns_off = on.quality["noise_scale"], off.quality["noise_scale"]
    assert ns_off["b_simple_tokens"] is None and "off" in ns_off["why"]
    assert len(ns["per_point"]) == 3  # steps 2, 4, 6
    ranks = contributing if contributing is not None else world.size
    assert all(p["ranks"] == ranks for p in ns["per_point"]), ns["per_point"]
    assert ns["probe_s"] > 0
    if ranks < 2:
        assert ns["b_simple_tokens"] is None and "two contributing" in ns["why"], ns
    else:
        assert ns["points"] == 3 and ns["global_batch_tokens"] > 0
        # A null estimate only where the recorded points give none (issue 39: an estimate
        # dropped between b_simple and the record passed here before).
        g2 = [p["g2"] for p in ns["per_point"]]
        if sum(g2) > 0:
            assert ns["why"] is None and ns["b_simple_tokens"] is not None, ns
            assert ns["p10"] <= ns["b_simple_tokens"] <= ns["p90"], ns
        else:
            assert ns["b_simple_tokens"] is None and "not positive" in ns["why"], ns
