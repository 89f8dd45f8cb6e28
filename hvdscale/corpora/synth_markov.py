"""A learnable synthetic LM source: sentences from a random sparse Markov chain whose entropy
rate, and so the best perplexity any model can reach, is computed exactly.

The chain is over the ``V = vocab - 4`` real tokens (ids after the specials). Its state is the
last token (order 1) or the last two (order 2); each state has ``successors`` distinct next
tokens with Dirichlet(``alpha``) weights. The chain depends only on the data seed, so every rank
(and the evaluation set) samples the same language. Sentences start from the chain's stationary
distribution, so every position is distributed as the stationary chain and the floor is exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hvdscale.errors import HvdscaleError

_CHAIN_SALT = 0x6D61726B  # keeps the chain's random stream apart from the sentences' streams
MAX_ENTRIES = 10_000_000
"""Largest chain (states x successors) built: ~0.2 GB of arrays, about ten seconds to build
(1.3 M entries took 1 s here)."""


@dataclass(frozen=True)
class MarkovChain:
    """A sparse Markov chain over ``tokens`` real tokens (ids offset by ``first_id``)."""

    order: int
    tokens: int
    first_id: int
    succ: np.ndarray
    """[states, k] next-token index (0..tokens-1) of each state's successors."""
    prob: np.ndarray
    """[states, k] their probabilities (rows sum to 1)."""
    stationary: np.ndarray
    """[states] the stationary distribution over states."""

    def next_state(self, state: np.ndarray, token: np.ndarray) -> np.ndarray:
        """The state after ``token`` (token indices, not ids) follows ``state``."""
        if self.order == 1:
            return token
        return (state % self.tokens) * self.tokens + token

    def entropy_rate(self) -> float:
        """Nats per token of the stationary chain: sum_s pi(s) H(P(.|s))."""
        return float(self.stationary @ _row_entropy(self.prob))

    def first_step_entropy(self) -> float:
        """Nats of the first predicted token given only one token of context (order 2 sees
        fewer tokens than its state at a sentence's second position; order 1 sees its state)."""
        if self.order == 1:
            return self.entropy_rate()
        v = self.tokens
        # Joint of (x0, x1) = marginal of the state; then of (x0, x1) -> x2 given only x1.
        prev = self.stationary.reshape(v, v).sum(axis=0)  # P(x1)
        joint = np.zeros((v, v))  # joint[x1, x2]
        states = np.arange(v * v)
        np.add.at(joint, ((states % v)[:, None], self.succ),
                  self.stationary[:, None] * self.prob)
        cond = joint / np.maximum(prev[:, None], 1e-300)
        return float(prev @ _row_entropy(cond))

    def floor_loss(self, sentence_lengths: np.ndarray) -> float:
        """Expected per-token loss floor of an LM over sentences of these lengths (its targets
        are tokens 1..L-1 of each sentence, predicted from the tokens before)."""
        lens = np.asarray(sentence_lengths, dtype=np.int64)
        targets = float(np.maximum(lens - 1, 0).sum())
        if targets == 0:
            return float("nan")
        first = float((lens >= 2).sum())
        return (first * self.first_step_entropy()
                + (targets - first) * self.entropy_rate()) / targets


def _row_entropy(p: np.ndarray) -> np.ndarray:
    """Entropy in nats of each row of a probability matrix (0 log 0 = 0)."""
    safe = np.where(p > 0, p, 1.0)
    return -(p * np.log(safe)).sum(axis=1)


def make_chain(vocab: int, order: int, successors: int, alpha: float, seed: int,
               first_id: int = 4) -> MarkovChain:
    """The seeded chain over ids ``first_id .. vocab-1``.

    Raises:
        HvdscaleError: too few real tokens for the successors asked for, or a chain larger
            than ``MAX_ENTRIES`` (states x successors).
    """
    v = vocab - first_id
    if successors >= v:
        raise HvdscaleError(f"data.synthetic.markov_successors={successors} must be less than "
                            f"the {v} real tokens of model.src_vocab={vocab}")
    states = v**order
    if states * successors > MAX_ENTRIES:
        # The [states, successors] arrays and the power iteration over them grow as
        # v**order: past this they exhaust memory or run for hours instead of failing.
        raise HvdscaleError(
            f"data.synthetic.markov_order={order} with model.src_vocab={vocab} gives a chain "
            f"of {states:,} states x {successors} successors = {states * successors:,} "
            f"entries, more than {MAX_ENTRIES:,}: lower data.synthetic.markov_order or "
            f"model.src_vocab (order 2 allows about {int((MAX_ENTRIES / successors) ** 0.5)} "
            "real tokens)")
    rng = np.random.default_rng([seed, _CHAIN_SALT, order])
    # Distinct successors without a per-state loop: a random start plus strictly increasing
    # offsets below v (each gap in 1..(v-1)//k), taken modulo v.
    gaps = rng.integers(1, (v - 1) // successors + 1, size=(states, successors))
    succ = (rng.integers(0, v, size=(states, 1)) + np.cumsum(gaps, axis=1)) % v
    prob = rng.dirichlet(np.full(successors, alpha), size=states)
    prob = np.maximum(prob, 1e-12)  # a zero weight would give an infinite floor contribution
    prob /= prob.sum(axis=1, keepdims=True)
    chain = MarkovChain(order, v, first_id, succ, prob, np.full(states, 1.0 / states))
    return MarkovChain(order, v, first_id, succ, prob, _stationary(chain))


def _stationary(chain: MarkovChain, tol: float = 1e-13, max_iter: int = 20000) -> np.ndarray:
    """A stationary distribution by power iteration of the lazy chain (P + I) / 2, which has
    the same stationary distributions and is aperiodic, so the iteration converges."""
    states = chain.succ.shape[0]
    nxt = chain.next_state(np.arange(states)[:, None], chain.succ).ravel()
    pi = chain.stationary.copy()
    for _ in range(max_iter):
        moved = np.bincount(nxt, weights=(pi[:, None] * chain.prob).ravel(), minlength=states)
        new = 0.5 * (pi + moved)
        new /= new.sum()
        if np.abs(new - pi).sum() < tol:
            return new
        pi = new
    return pi


def sample_sentences(chain: MarkovChain, lengths: np.ndarray,
                     rng: np.random.Generator) -> list[np.ndarray]:
    """Sentences of the given lengths (token ids), each starting from the stationary chain."""
    n = len(lengths)
    lens = np.asarray(lengths, dtype=np.int64)
    out = np.zeros((n, int(lens.max()) if n else 0), dtype=np.int64)
    state = rng.choice(chain.stationary.size, size=n, p=chain.stationary)
    v = chain.tokens
    if chain.order == 1:
        out[:, 0] = state
    else:
        out[:, 0], first = state // v, state % v
        if out.shape[1] > 1:
            out[:, 1] = first
    cum = np.cumsum(chain.prob, axis=1)
    for t in range(chain.order, out.shape[1]):
        u = rng.random(n)[:, None]
        pick = np.minimum((cum[state] < u).sum(axis=1), cum.shape[1] - 1)
        tok = chain.succ[state, pick]
        out[:, t] = tok
        state = chain.next_state(state, tok)
    return [out[i, : lens[i]] + chain.first_id for i in range(n)]


def sample_log_probs(chain: MarkovChain, length: int, rng: np.random.Generator) -> np.ndarray:
    """Log-probabilities of each transition of one long run of the chain (a Monte Carlo check
    of ``entropy_rate``: their negated mean converges to it)."""
    cum = np.cumsum(chain.prob, axis=1)
    state = rng.choice(chain.stationary.size, p=chain.stationary)
    out = np.empty(length)
    u = rng.random(length)
    for t in range(length):
        pick = min(int((cum[state] < u[t]).sum()), cum.shape[1] - 1)
        out[t] = math.log(chain.prob[state, pick])
        state = int(chain.next_state(np.int64(state), np.int64(chain.succ[state, pick])))
    return out
