"""The Markov source: its exact floor against a Monte Carlo estimate, and a small LM that gets
within 10% of the perplexity floor (uniform tokens, the negative control, never do)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from hvdscale.config import DataConfig, ModelConfig, OptimConfig, SyntheticConfig
from hvdscale.corpora.corpus import collate, make_synthetic
from hvdscale.corpora.evalset import make_eval_set
from hvdscale.corpora.synth_markov import make_chain, sample_log_probs, sample_sentences
from hvdscale.errors import HvdscaleError
from hvdscale.train.evaluate import eval_loss_sum

VOCAB = 28  # 24 real tokens: learns in a few hundred steps


@pytest.mark.parametrize("order", [1, 2])
def test_floor_matches_monte_carlo(order: int) -> None:
    chain = make_chain(VOCAB, order, 4, 0.5, seed=3)
    mc = -sample_log_probs(chain, 60_000, np.random.default_rng(5)).mean()
    # Standard error of the mean is about 0.004 nats here; a wrong stationary distribution
    # (uniform over states instead) moves the rate by more than 0.05.
    assert abs(mc - chain.entropy_rate()) < 0.02, (mc, chain.entropy_rate())


def test_sentences_follow_the_chain() -> None:
    chain = make_chain(VOCAB, 1, 4, 0.5, seed=3)
    for s in sample_sentences(chain, np.array([30] * 20), np.random.default_rng(1)):
        idx = s - 4
        for a, b in itertools.pairwise(idx):
            assert b in chain.succ[a]


def _train(kind: str, steps: int) -> tuple[float, float | None]:
    """Train a tiny LM on the source; the final eval perplexity and the source's floor."""
    torch = pytest.importorskip("torch")
    from hvdscale.frameworks.torch.adapter import make_adapter

    torch.manual_seed(0)
    torch.set_num_threads(1)  # a shared machine: one compute thread, as the runs use
    syn = SyntheticConfig(kind=kind, markov_successors=4, length_dist="uniform", min_len=10,
                          max_len=20, sentences_per_rank=2000, eval_sentences=200)
    data = DataConfig(synthetic=syn)
    model = ModelConfig(kind="lm", embed_dim=16, hidden_size=32, src_vocab=VOCAB,
                        tgt_vocab=VOCAB)
    adapter = make_adapter(model, OptimConfig(name="adam", lr=0.02), VOCAB, VOCAB)
    corpus = make_synthetic(syn, "lm", VOCAB, VOCAB, data.seed, 0)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        pick = rng.integers(0, len(corpus.src), size=32)
        batch = collate([corpus.src[i] for i in pick], None, "lm")
        adapter.zero_grad()
        adapter.forward_backward(batch, 1.0 / batch.loss_tokens)
        adapter.step()
    ev = make_eval_set(data, "lm", VOCAB, VOCAB, 64)
    return math.exp(eval_loss_sum(adapter, ev) / ev.tokens), ev.floor_loss


def test_lm_gets_within_10_percent_of_the_floor() -> None:
    ppl, floor = _train("markov", 200)
    assert floor is not None
    assert ppl <= 1.10 * math.exp(floor), (ppl, math.exp(floor))
    # Negative control: on uniform tokens the same model stays far from the Markov floor and
    # never beats its own floor (ln of the real tokens).
    uniform_ppl, uniform_floor = _train("uniform", 200)
    assert uniform_ppl > 1.5 * math.exp(floor), (uniform_ppl, math.exp(floor))
    assert uniform_floor is not None and uniform_ppl >= 0.97 * math.exp(uniform_floor)


def test_a_chain_too_large_to_build_is_one_clear_error() -> None:
    # 5000 tokens at order 2: 25 M states, whose arrays and power iteration would exhaust
    # memory or run for hours; refused before anything is allocated.
    with pytest.raises(HvdscaleError, match=r"markov_order=2 with model\.src_vocab=5000"):
        make_chain(5000, 2, 8, 0.5, seed=1)
    assert make_chain(5000, 1, 8, 0.5, seed=1).succ.shape == (4996, 8)  # order 1 is fine
