"""Useful floating-point work of a training step, counted from the model's sizes: the
single-device form of "why not better" (achieved FLOP/s beside what the GEMMs can do).

Only the matrix products count, forward and backward (the data and the weight gradient: three
products of the forward's size): the LSTM layers' input and recurrent GEMMs (M = 4 x hidden),
the attention products where the model has them, and the softmax projection. Elementwise work,
embeddings and the loss are left out: they are not what a GPU's peak measures. Counted per real
token, so padding is work the model did but not useful work.
"""

from __future__ import annotations

from hvdscale.config.model import ModelConfig
from hvdscale.errors import HvdscaleError
from hvdscale.records.run import RunRecord

FWD_BWD = 3  # forward, data gradient, weight gradient: three products of the forward's size


def lstm_flops_per_token(input_size: int, hidden: int, layers: int, directions: int = 1) -> int:
    """GEMM flops per token of a stacked LSTM, training (forward and backward)."""
    total, width = 0, input_size
    for _ in range(layers):
        total += directions * 2 * 4 * hidden * (width + hidden)
        width = directions * hidden
    return FWD_BWD * total


def output_vocab(model: ModelConfig, vocab: dict[str, int] | None = None) -> int:
    """The output projection's width: the language model predicts its one vocabulary
    (``src_vocab``), the NMT model the target's. A record's ``vocab`` (the sizes in use) wins
    over the config's, which is 0 where the data decided it."""
    side = "src" if model.kind == "lm" else "tgt"
    return int((vocab or {}).get(side) or getattr(model, f"{side}_vocab"))


def flops_per_word(model: ModelConfig,
                   vocab: dict[str, int] | None = None) -> dict[str, float]:
    """Training flops per real token (``words`` in a record) of a record's ``config.model``
    (``vocab``: the record's sizes in use, see ``output_vocab``).

    NMT records count source and target tokens together: the encoder runs on the source, the
    decoder and the projection on the target; with both sides of about equal length (the
    synthetic and mapped sources), a word carries half of each.
    """
    if model.kind not in ("nmt", "lm"):
        raise HvdscaleError(f"useful flops are counted for the shipped models (nmt, lm), not "
                            f"model.kind={model.kind}")
    h, e, v = model.hidden_size, model.embed_dim, output_vocab(model, vocab)
    proj = FWD_BWD * 2 * h * v
    if model.kind == "lm":
        rnn = lstm_flops_per_token(e, h, model.encoder_layers)
        return {"rnn": float(rnn), "projection": float(proj), "total": float(rnn + proj)}
    dirs = 2 if model.bidirectional else 1
    enc = lstm_flops_per_token(e, h // dirs, model.encoder_layers, dirs)
    dec = lstm_flops_per_token(e, h, model.decoder_layers)
    attn = FWD_BWD * 2 * (2 * h) * h if model.attention else 0  # attn_out only
    parts = {"rnn": (enc + dec) / 2, "projection": (proj + attn) / 2}
    return {**parts, "total": parts["rnn"] + parts["projection"]}


def achieved(record: RunRecord) -> dict[str, float]:
    """A run record's useful TFLOP/s in its measured window, in total and per rank."""
    per_word = flops_per_word(record.model_config, record.vocab)
    tflops = record.words_per_s * per_word["total"] / 1e12
    return {"flops_per_word": per_word["total"], "tflops": tflops,
            "tflops_per_rank": tflops / max(1, record.workers or record.ranks)}
