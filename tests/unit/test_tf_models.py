"""The TensorFlow models: PyTorch's layout, fused == loop, padding invariance, same function as
PyTorch, one tf.function trace for all batch shapes."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

try:  # one compute thread, set before any TensorFlow op runs
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
except RuntimeError:
    pass  # TensorFlow already initialised by an earlier test module: its setting stays

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from hvdscale.config import ModelConfig, load_config
from hvdscale.core.batching import BatchPlan
from hvdscale.corpora.corpus import Batch, load_corpus
from hvdscale.models import ModelSizes
from hvdscale.models import tf as tf_models
from hvdscale.models import torch as torch_models

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))
SRC_V, TGT_V = 40, 45

# (kind, overrides): nmt bi + attention 2+2 layers, nmt uni without attention, lm 2 layers.
CASES = {
    "nmt-bi-attn": ("nmt", ["model.bidirectional=true", "model.attention=true",
                            "model.encoder_layers=2", "model.decoder_layers=2"]),
    "nmt-uni": ("nmt", ["model.bidirectional=false", "model.attention=false"]),
    "lm": ("lm", ["model.encoder_layers=2"]),
    "nmt-attn-1": ("nmt", ["model.bidirectional=true", "model.attention=true"]),
}


def _model_args(m: ModelConfig, src_vocab: int, tgt_vocab: int) -> list:
    return [m.kind, m.rnn_impl, ModelSizes.from_config(m, src_vocab, tgt_vocab)]


def _setup(case: str, impl: str) -> tuple[ModelConfig, Batch]:
    """A small model config and one batch with sentences of different lengths."""
    kind, extra = CASES[case]
    cfg = load_config(None, [f"model.kind={kind}", f"model.rnn_impl={impl}",
                             "model.embed_dim=12", "model.hidden_size=16",
                             f"model.src_vocab={SRC_V}", f"model.tgt_vocab={TGT_V}",
                             "data.synthetic.max_len=12", "data.synthetic.sentences_per_rank=12",
                             "data.batch_size=6", *extra])
    corpus = load_corpus(cfg.data, kind, SRC_V, TGT_V, 0, 1)
    batch = next(BatchPlan(corpus, cfg.data, kind, 6, 0).batches())
    assert len(set(batch.src_len.tolist())) > 1, "lengths must differ to exercise masking"
    return cfg.model, batch


def _tf_model(m: ModelConfig, seed: int = 7) -> tf.Module:
    return tf_models.build_model(*_model_args(m, SRC_V, TGT_V), seed=seed)


def _inputs(batch: Batch) -> list[tf.Tensor]:
    tgt_in = batch.src if batch.tgt_in is None else batch.tgt_in  # the lm ignores it
    return [tf.constant(a) for a in (batch.src, batch.src_len, tgt_in, batch.tgt_out,
                                     batch.tgt_len)]


def _tf_loss_grads(model: tf.Module, batch: Batch) -> tuple[float, list[np.ndarray]]:
    with tf.GradientTape() as tape:
        loss, tokens = model(*_inputs(batch))
    assert loss.dtype == tf.float32 and int(tokens) == batch.loss_tokens
    grads = tape.gradient(loss, model.trainable_variables)
    assert isinstance(grads[0], tf.IndexedSlices), "embedding gradients stay gathered"
    return float(loss), [tf.convert_to_tensor(g).numpy() for g in grads]


def _assert_grads_close(got: list[np.ndarray], want: list[np.ndarray], names: list[str],
                        rel: float) -> None:
    """Each gradient within ``rel`` x its largest magnitude (float32 sums reorder)."""
    assert len(got) == len(want)
    for g, w, name in zip(got, want, names, strict=True):
        assert g.shape == w.shape, name
        scale = float(np.abs(w).max())
        assert scale > 0, f"{name}: zero gradient proves nothing"
        err = float(np.abs(g - w).max())
        assert err <= rel * scale, f"{name}: max |diff| {err:.3g} > {rel} x {scale:.3g}"


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_parameter_layout_matches_torch_for_every_shipped_config(path: Path) -> None:
    m = load_config(path).model
    assert m.src_vocab and m.tgt_vocab, "shipped configs name their vocabularies"
    with torch.device("meta"):  # shapes only: no memory, no init
        tm = torch_models.build_model(*_model_args(m, m.src_vocab, m.tgt_vocab))
    want = [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    tfm = tf_models.build_model(*_model_args(m, m.src_vocab, m.tgt_vocab), seed=m.seed)
    got = [(n, tuple(v.shape)) for n, v in zip(tfm.param_names(), tfm.trainable_variables,
                                               strict=True)]
    assert got == want
    assert [v.shape for v in tfm.variables] == [v.shape for v in tfm.trainable_variables]
    assert (sum(int(np.prod(v.shape)) for v in tfm.trainable_variables)
            == sum(p.numel() for p in tm.parameters()))


@pytest.mark.parametrize("case", ["nmt-bi-attn", "nmt-uni", "lm"])
def test_fused_and_loop_agree_on_loss_and_gradients(case: str) -> None:
    m, batch = _setup(case, "fused")
    fused = _tf_model(m)
    loop = _tf_model(replace(m, rnn_impl="loop"), seed=99)
    for a, b in zip(fused.trainable_variables, loop.trainable_variables, strict=True):
        b.assign(a)
    lf, gf = _tf_loss_grads(fused, batch)
    ll, gl = _tf_loss_grads(loop, batch)
    assert lf == pytest.approx(ll, rel=1e-5)
    _assert_grads_close(gl, gf, fused.param_names(), rel=1e-5)


@pytest.mark.parametrize("impl", ["fused", "loop"])
@pytest.mark.parametrize("case", ["nmt-bi-attn", "lm"])
def test_padding_never_changes_loss_or_gradients(case: str, impl: str) -> None:
    m, batch = _setup(case, impl)
    model = _tf_model(m)

    def widen(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else np.pad(a, ((0, 0), (0, 7)))

    wide = Batch(widen(batch.src), batch.src_len, widen(batch.tgt_in), widen(batch.tgt_out),
                 batch.tgt_len)
    l0, g0 = _tf_loss_grads(model, batch)
    l1, g1 = _tf_loss_grads(model, wide)
    assert l1 == pytest.approx(l0, rel=1e-6)
    _assert_grads_close(g1, g0, model.param_names(), rel=1e-6)


@pytest.mark.parametrize("impl", ["fused", "loop"])
@pytest.mark.parametrize("case", ["nmt-bi-attn", "lm"])
def test_same_loss_and_gradients_as_torch_for_the_same_weights(case: str, impl: str) -> None:
    m, batch = _setup(case, impl)
    torch.set_num_threads(1)
    torch.manual_seed(3)
    tm = torch_models.build_model(*_model_args(m, SRC_V, TGT_V))
    model = _tf_model(m)
    assert model.param_names() == [n for n, _ in tm.named_parameters()]
    for v, p in zip(model.trainable_variables, tm.parameters(), strict=True):
        v.assign(p.detach().numpy())
    t = {k: None if a is None else torch.from_numpy(a) for k, a in batch.__dict__.items()}
    loss, tokens = tm(t["src"], t["src_len"], t["tgt_in"], t["tgt_out"], t["tgt_len"])
    assert int(tokens) == batch.loss_tokens
    loss.backward()
    want = [p.grad.numpy() for p in tm.parameters()]
    got_loss, got = _tf_loss_grads(model, batch)
    assert got_loss == pytest.approx(float(loss.detach()), rel=1e-5)
    _assert_grads_close(got, want, model.param_names(), rel=1e-4)


@pytest.mark.parametrize("impl", ["fused", "loop"])
def test_one_tf_function_trace_serves_every_batch_shape(impl: str) -> None:
    m, batch = _setup("nmt-attn-1", impl)
    model = _tf_model(m)
    # int32 ids and lengths, as the TF adapter feeds them (the eager tests use int64).
    ids = tf.TensorSpec([None, None], tf.int32)
    lens = tf.TensorSpec([None], tf.int32)

    @tf.function(input_signature=[ids, lens, ids, ids, lens])
    def step(src, src_len, tgt_in, tgt_out, tgt_len):  # type: ignore[no-untyped-def]
        with tf.GradientTape() as tape:
            loss, tokens = model(src, src_len, tgt_in, tgt_out, tgt_len)
        return loss, tokens, tape.gradient(loss, model.trainable_variables)

    cut = Batch(batch.src[:4, :-2], np.minimum(batch.src_len[:4], batch.src.shape[1] - 2),
                batch.tgt_in[:4], batch.tgt_out[:4], batch.tgt_len[:4])
    for b in (batch, cut):
        loss, tokens, grads = step(*[tf.cast(a, tf.int32) for a in _inputs(b)])
        eager_loss, eager_grads = _tf_loss_grads(model, b)
        assert float(loss) == pytest.approx(eager_loss, rel=1e-6)
        assert int(tokens) == b.loss_tokens
        _assert_grads_close([tf.convert_to_tensor(g).numpy() for g in grads], eager_grads,
                            model.param_names(), rel=1e-6)
    assert step.experimental_get_tracing_count() == 1


def test_cudnn_path_builds_a_differentiable_graph() -> None:
    """The GPU path's graph (forward and gradient) builds; it is not run: no GPU here."""
    m, _ = _setup("nmt-attn-1", "fused")
    model = _tf_model(m)
    for stack in (model.encoder, model.decoder):
        stack.use_cudnn = True
    ids = tf.TensorSpec([None, None], tf.int64)
    lens = tf.TensorSpec([None], tf.int64)

    @tf.function(input_signature=[ids, lens, ids, ids, lens])
    def step(src, src_len, tgt_in, tgt_out, tgt_len):  # type: ignore[no-untyped-def]
        with tf.GradientTape() as tape:
            loss, _ = model(src, src_len, tgt_in, tgt_out, tgt_len)
        return tape.gradient(loss, model.trainable_variables)

    graph = step.get_concrete_function().graph
    ops = {op.type for op in graph.get_operations()}
    assert {"CudnnRNNV3", "CudnnRNNBackpropV3"} <= ops and "BlockLSTMV2" not in ops
