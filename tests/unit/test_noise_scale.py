"""The gradient-noise-scale estimator on synthetic gradients whose tr(Sigma) and |G|^2 are known."""

import numpy as np

from hvdscale.train.noise_scale import b_simple, local_sums, point_from_sums

D = 40
TRUE_G = np.full(D, 0.05)
SIGMA_DIAG = np.linspace(0.5, 1.5, D)  # tr(Sigma) = 40
TRUE_B = SIGMA_DIAG.sum() / float(TRUE_G @ TRUE_G)  # 400 tokens


def _reduced(rng, batches):
    """The allreduce of per-rank sums: token-mean grads g_i = G + N(0, Sigma/B_i)."""
    total = np.zeros(D + 4)
    for b in batches:
        g = TRUE_G + rng.normal(size=D) * np.sqrt(SIGMA_DIAG / b)
        total += local_sums(g * b, b, D)
    return total


def _points(batches, n=3000, seed=1):
    rng = np.random.default_rng(seed)
    return [point_from_sums(_reduced(rng, batches)) for _ in range(n)]


def test_uneven_batches_land_near_true_b_simple():
    got = b_simple(_points([8, 64, 64]))
    assert abs(got["b_simple_tokens"] / TRUE_B - 1) < 0.1, got
    assert got["p10"] <= got["b_simple_tokens"] <= got["p90"]
    assert got["points"] == 3000


def test_biased_variants_miss_the_tolerance():
    """Arithmetic mean of B_i, and mean of per-point ratios, fail the same tolerance."""
    rng = np.random.default_rng(1)
    batches = [8, 64, 64]
    g2s, ss, ratios = [], [], []
    for _ in range(3000):
        r = _reduced(rng, batches)
        b_big, b_small = r[-4], r[-4] / r[-1]  # arithmetic mean: the bias
        gb = r[:-4] / b_big
        gbs, ms = float(gb @ gb), r[-2] / r[-1]
        g2s.append((b_big * gbs - b_small * ms) / (b_big - b_small))
        ss.append((ms - gbs) / (1 / b_small - 1 / b_big))
        p = point_from_sums(r)
        ratios.append(p.s / p.g2)
    assert abs(np.mean(ss) / np.mean(g2s) / TRUE_B - 1) > 0.1
    assert abs(np.median(ratios) / TRUE_B - 1) > 0.1 or abs(np.mean(ratios) / TRUE_B - 1) > 0.1


def test_one_rank_or_idle_ranks_give_no_point():
    rng = np.random.default_rng(0)
    one = _reduced(rng, [16]) + local_sums(None, 0, D)  # a server adds zeros
    assert point_from_sums(one) is None
    assert b_simple([]) is None


def test_bootstrap_is_deterministic():
    pts = _points([16, 16], n=50)
    assert b_simple(pts) == b_simple(pts)


def test_torch_probe_grad_matches_backward_and_leaves_grads_alone():
    """probe_grad is the summed-loss gradient (the one forward_backward with scale 1 leaves in
    the flat gradient buffer) and touches neither .grad nor the parameters."""
    import pytest

    torch = pytest.importorskip("torch")
    from hvdscale.config import ModelConfig, OptimConfig, SyntheticConfig
    from hvdscale.corpora.corpus import collate, make_synthetic
    from hvdscale.frameworks.torch.adapter import make_adapter

    torch.manual_seed(0)
    syn = SyntheticConfig(kind="markov", markov_successors=4, length_dist="uniform", min_len=5,
                          max_len=9, sentences_per_rank=40, eval_sentences=10)
    model = ModelConfig(kind="lm", embed_dim=8, hidden_size=8, src_vocab=20, tgt_vocab=20)
    adapter = make_adapter(model, OptimConfig(name="sgd", lr=0.1), 20, 20)
    corpus = make_synthetic(syn, "lm", 20, 20, 0, 0)
    batch = collate(list(corpus.src[:6]), None, "lm")
    adapter.zero_grad()
    adapter.forward_backward(collate(list(corpus.src[6:9]), None, "lm"), 1.0)
    before_grads = adapter.grads_buffer().copy()
    before_params = adapter.params_buffer().copy()
    probe = adapter.probe_grad(batch)
    assert probe.shape == (sum(n for _, n in adapter.tensor_sizes()),)
    assert np.array_equal(adapter.grads_buffer(), before_grads)
    assert np.array_equal(adapter.params_buffer(), before_params)
    adapter.zero_grad()
    adapter.forward_backward(batch, 1.0)
    assert np.allclose(probe, adapter.grads_buffer(), rtol=1e-5, atol=1e-6)
    assert np.abs(probe).sum() > 0


def test_tf_probe_grad_matches_backward_and_leaves_grads_alone():
    """The TensorFlow probe: same contract as the torch one (a sparse embedding densified)."""
    import pytest

    pytest.importorskip("tensorflow")
    from hvdscale.config import ModelConfig, OptimConfig, SyntheticConfig
    from hvdscale.corpora.corpus import collate, make_synthetic
    from hvdscale.frameworks.tf.adapter import make_adapter

    syn = SyntheticConfig(kind="markov", markov_successors=4, length_dist="uniform", min_len=5,
                          max_len=9, sentences_per_rank=40, eval_sentences=10)
    model = ModelConfig(kind="lm", embed_dim=8, hidden_size=8, src_vocab=20, tgt_vocab=20)
    adapter = make_adapter(model, OptimConfig(name="sgd", lr=0.1), 20, 20)
    corpus = make_synthetic(syn, "lm", 20, 20, 0, 0)
    batch = collate(list(corpus.src[:6]), None, "lm")
    adapter.zero_grad()
    adapter.forward_backward(collate(list(corpus.src[6:9]), None, "lm"), 1.0)
    before_grads = adapter.grads_buffer().copy()
    before_params = adapter.params_buffer().copy()
    probe = adapter.probe_grad(batch)
    assert probe.shape == (sum(n for _, n in adapter.tensor_sizes()),)
    assert np.array_equal(adapter.grads_buffer(), before_grads)
    assert np.array_equal(adapter.params_buffer(), before_params)
    adapter.zero_grad()
    adapter.forward_backward(batch, 1.0)
    assert np.allclose(probe, adapter.grads_buffer(), rtol=1e-4, atol=1e-5)
    assert np.abs(probe).sum() > 0


def test_report_prints_b_simple_beside_the_statistical_efficiency():
    """Crafted records: the weak 2-rank row shows its global batch in tokens and B_simple with
    its p10-p90; the 1-rank row (no estimate) shows dashes; the intro has the legend."""
    from hvdscale.study.quality.time_to_quality import quality_section
    from tests.unit.test_quality_report import _record

    one = _record(1, "weak", [3.0, 2.5, 1.5], 1000.0)
    two = _record(2, "weak", [3.0, 1.5], 1800.0)
    two.quality["noise_scale"] = {"b_simple_tokens": 812.4, "p10": 640.2, "p90": 1003.9,
                                     "global_batch_tokens": 1210.0, "points": 2}
    one.quality["noise_scale"] = {"b_simple_tokens": None, "global_batch_tokens": None,
                                     "why": "needs at least two ranks"}
    md = quality_section([one, two])
    head = next(line for line in md.splitlines() if line.startswith("| ranks"))
    row2 = next(line for line in md.splitlines() if line.startswith("| 2 |"))
    row1 = next(line for line in md.splitlines() if line.startswith("| 1 |"))
    cols = [c.strip() for c in head.strip("|").split("|")]
    cells = [c.strip() for c in row2.strip("|").split("|")]
    assert len(cells) == len(cols)
    weak = cols.index("weak: batch/rank")
    at = {name: cells[i] for i, name in enumerate(cols) if i >= weak}
    assert at["batch (tokens)"] == "1210" and at["B_simple (tokens)"] == "812 (640-1004)"
    assert at["stat. eff."] != ""
    assert "- | - |" in row1
    assert "B_simple" in md.split("###")[0] and "well above" in md.split("###")[0]
