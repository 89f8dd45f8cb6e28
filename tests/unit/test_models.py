"""The fused kernel and the step-by-step loop compute the same function."""

from __future__ import annotations

import pytest
import torch

from hvdscale.config import load_config
from hvdscale.core.batching import BatchPlan
from hvdscale.corpora.corpus import load_corpus
from hvdscale.frameworks.torch import TorchAdapter


@pytest.mark.parametrize("kind,extra", [
    ("nmt", ["model.bidirectional=true", "model.attention=true", "model.encoder_layers=2",
             "model.decoder_layers=2"]),
    ("nmt", ["model.bidirectional=false", "model.attention=false"]),
    ("lm", ["model.encoder_layers=2"]),
])
def test_fused_and_loop_agree_on_loss_and_gradients(kind: str, extra: list[str]) -> None:
    torch.set_num_threads(1)
    common = [f"model.kind={kind}", "model.embed_dim=12", "model.hidden_size=16",
              "model.src_vocab=40", "model.tgt_vocab=45", "data.synthetic.max_len=15",
              "data.synthetic.sentences_per_rank=20", "data.batch_size=6", *extra]
    fused = load_config(None, [*common, "model.rnn_impl=fused"])
    loop = load_config(None, [*common, "model.rnn_impl=loop"])
    a = TorchAdapter(fused.model, fused.optim, 40, 45)
    b = TorchAdapter(loop.model, loop.optim, 40, 45)
    assert list(a.model.state_dict()) == list(b.model.state_dict())
    b.model.load_state_dict(a.model.state_dict())
    corpus = load_corpus(fused.data, kind, 40, 45, 0, 1)
    batch = next(BatchPlan(corpus, fused.data, kind, 6, 0).batches())
    assert len(set(batch.src_len.tolist())) > 1, "lengths must differ to exercise masking"
    for x in (a, b):
        x.zero_grad()
    la = a.forward_backward(batch, 1.0)
    lb = b.forward_backward(batch, 1.0)
    assert la == pytest.approx(lb, rel=1e-5)
    ga, gb = a.grads_buffer(), b.grads_buffer()
    assert abs(ga).sum() > 0
    torch.testing.assert_close(torch.from_numpy(gb), torch.from_numpy(ga), rtol=1e-4, atol=1e-6)


def test_loss_is_summed_over_real_tokens_only() -> None:
    common = ["model.src_vocab=30", "model.tgt_vocab=30", "model.embed_dim=8",
              "model.hidden_size=8", "data.synthetic.sentences_per_rank=8", "data.batch_size=4",
              "data.synthetic.max_len=10", "data.synthetic.mean_len=4"]
    cfg = load_config(None, common)
    corpus = load_corpus(cfg.data, "nmt", 30, 30, 0, 1)
    plan = BatchPlan(corpus, cfg.data, "nmt", 4, 0)
    batch = next(plan.batches())
    padded = load_config(None, [*common, "data.pad_to=max"])
    wide = BatchPlan(corpus, padded.data, "nmt", 4, 0).make(plan.epoch_batches(0)[0])
    assert wide.padded_tokens > batch.padded_tokens
    a = TorchAdapter(cfg.model, cfg.optim, 30, 30)
    assert a.loss(batch) == pytest.approx(a.loss(wide), rel=1e-5)
