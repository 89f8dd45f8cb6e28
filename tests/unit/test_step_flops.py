"""Useful flops per word against the real model's weight matrices: a training step does six
flops per weight per token in each GEMM (2 forward, 2 + 2 backward)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hvdscale.config import ModelConfig, load_config
from hvdscale.study.stepcost.step_flops import achieved, flops_per_word
from tests.records_fixture import run_record

torch = pytest.importorskip("torch")


def _gemm_weights(module: object) -> int:
    # LSTM input/recurrent matrices and the projection: every 2-D weight but the embeddings.
    return sum(p.numel() for n, p in module.named_parameters()
               if p.dim() == 2 and "embed" not in n)


# The vocabularies differ, so a projection counted over the other side's vocabulary shows.
@pytest.mark.parametrize("sets", [["model.kind=lm", "data.synthetic.kind=markov",
                                   "model.src_vocab=1500", "model.tgt_vocab=300"],
                                  ["model.encoder_layers=2", "model.decoder_layers=2",
                                   "model.src_vocab=300", "model.tgt_vocab=1500"]])
def test_flops_per_word_is_six_per_gemm_weight(sets: list[str]) -> None:
    from hvdscale.frameworks.torch import make_adapter

    cfg = load_config("configs/demo.yaml", ["model.rnn_impl=fused", *sets])
    model = cfg.model
    adapter = make_adapter(cfg.model, cfg.optim, model.src_vocab, model.tgt_vocab)
    m = adapter.model
    if cfg.model.kind == "lm":
        expected = 6 * _gemm_weights(m)
    else:  # a word is half source (encoder) and half target (decoder and projection)
        expected = 6 * (_gemm_weights(m.encoder) + _gemm_weights(m.decoder)
                        + _gemm_weights(m.proj)) / 2
    assert flops_per_word(model)["total"] == pytest.approx(expected)
    rec = run_record(cfg=cfg, words_per_s=1e6, ranks=2, workers=2)
    assert achieved(rec)["tflops_per_rank"] == pytest.approx(expected / 2e6)


def test_a_records_vocabulary_in_use_wins_over_a_config_that_left_it_to_the_data() -> None:
    # Text corpora: the config says 0 and the record's ``vocab`` holds the sizes the model had.
    lm = ModelConfig(kind="lm", hidden_size=64, embed_dim=32, encoder_layers=1, src_vocab=0,
                     tgt_vocab=0)
    known = flops_per_word(replace(lm, src_vocab=900))
    assert flops_per_word(lm, {"src": 900, "tgt": 5})["projection"] == known["projection"]
    assert known["projection"] == 6 * 64 * 900
