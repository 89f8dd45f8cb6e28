"""The network trained and its optimizer: read only by the model builders and the adapters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hvdscale.config.builder import check_custom
from hvdscale.config.fields import check as _check

RNN_IMPLS = ("fused", "loop", "compiled")
"""The values of ``model.rnn_impl``."""


@dataclass(frozen=True)
class ModelConfig:
    """The network trained; read only by the model builders."""

    kind: Literal["nmt", "lm", "custom"] = "nmt"
    """``nmt``: seq2seq LSTM translation model; ``lm``: RNN language model; ``custom``: the
    user's own model, made by ``builder`` (docs/custom-models.md)."""
    task: Literal["nmt", "lm"] | None = None
    """Which batches a ``custom`` model gets: ``nmt`` (source and target sentences) or ``lm``
    (one side; ``tgt_in`` is None). Required with ``kind: custom``; for the shipped models it
    may only repeat ``kind``."""
    builder: str | None = None
    """``kind: custom`` only: ``"PACKAGE.MODULE:FUNCTION"``, the function that builds the
    model. The module is looked up first in ``builder_path``, then on ``sys.path``
    (``PYTHONPATH``)."""
    builder_path: str | None = None
    """Directory searched first for ``builder``'s module. A config file that names a builder
    and leaves this unset gets the config file's own directory (made absolute), so a model
    module next to its config.yaml is found from any working directory; a relative path is
    taken from the config file's directory too. Not part of a run's identity
    (``builder_sha256`` is)."""
    builder_sha256: str | None = None
    """sha256 of the builder module's source, filled in when the config is read (any value
    set by hand is replaced): a changed model is a new experiment."""
    rnn_impl: Literal["fused", "loop", "compiled"] = "fused"
    """``fused``: the library kernel (``nn.LSTM``, the seed notes' cudnn_lstm); ``loop``: an
    explicit per-time-step cell loop (the seed notes' dynamic_rnn); ``compiled``: that loop with
    its cell compiled (PyTorch: ``torch.compile``, CUDA-graph capture on a GPU; the compile time
    is measured before the warm-up and recorded as ``compile``; TensorFlow refuses it,
    docs/precision.md says why)."""
    embed_dim: int = 64
    """Embedding width."""
    hidden_size: int = 64
    """LSTM state size (a bidirectional encoder splits it between the two directions)."""
    encoder_layers: int = 1
    """Encoder LSTM layers (nmt) or LSTM layers (lm)."""
    decoder_layers: int = 1
    """Decoder LSTM layers (nmt only)."""
    bidirectional: bool = True
    """Bidirectional encoder (the seed notes' ``--direction=bi``)."""
    attention: bool = False
    """Luong-style dot attention over the encoder outputs (nmt only)."""
    src_vocab: int = 1000
    """Source vocabulary size; with text corpora, 0 takes it from the data."""
    tgt_vocab: int = 1000
    """Target vocabulary size (nmt; the lm uses ``src_vocab``); 0 takes it from the data."""
    seed: int = 1234
    """Seed of the initial parameters (rank 0's are broadcast where the strategy syncs)."""

    @property
    def data_kind(self) -> str:
        """The batches the model gets (``nmt`` or ``lm``): ``kind``, or ``task`` when custom."""
        return str(self.task) if self.kind == "custom" else self.kind

    def __post_init__(self) -> None:
        _check(self.kind in ("nmt", "lm", "custom"), "model.kind",
               "must be 'nmt', 'lm' or 'custom'", self.kind)
        check_custom(self)
        _check(self.rnn_impl in RNN_IMPLS, "model.rnn_impl",
               "must be 'fused', 'loop' or 'compiled'", self.rnn_impl)
        for name in ("embed_dim", "hidden_size", "encoder_layers", "decoder_layers"):
            _check(getattr(self, name) >= 1, f"model.{name}", "must be >= 1", getattr(self, name))
        if self.bidirectional and self.kind == "nmt":  # a custom model splits as it likes
            _check(self.hidden_size % 2 == 0, "model.hidden_size",
                   "must be even with a bidirectional encoder", self.hidden_size)
        for name in ("src_vocab", "tgt_vocab"):
            v = getattr(self, name)
            _check(v == 0 or v >= 5, f"model.{name}", "must be 0 (from data) or >= 5", v)


SCALE_LR_RULES = ("none", "linear", "sqrt", "legw", "sqrt_adam")
"""The values of ``optim.scale_lr`` (hvdscale.train.lr says what each does, and its source)."""


@dataclass(frozen=True)
class OptimConfig:
    """The optimizer, identical under every strategy so all train the same function."""

    name: Literal["sgd", "momentum", "adam"] = "sgd"
    """``sgd``, ``momentum`` (heavy-ball SGD) or ``adam``."""
    lr: float = 0.5
    """Learning rate, applied to the token-averaged gradient."""
    momentum: float = 0.9
    """Momentum for ``momentum``."""
    betas: tuple[float, float] = (0.9, 0.999)
    """Adam's betas."""
    eps: float = 1e-8
    """Adam's epsilon."""
    scale_lr: Literal["none", "linear", "sqrt", "legw", "sqrt_adam"] = "none"
    """Learning-rate rule under weak scaling (the global batch grows k = workers times):
    ``none`` keeps ``lr``; ``linear`` x k; ``sqrt`` x sqrt(k); ``legw`` x sqrt(k) with a
    warm-up k times ``warmup_steps`` long; ``sqrt_adam`` (Adam only) x sqrt(k) and Adam's
    1 - beta1, 1 - beta2 times k and eps / sqrt(k). Strong scaling keeps every setting (its
    global batch is fixed). Sources in hvdscale.train.lr. The rule and what it set are
    recorded with the run (``record.quality.optim``); with ``warmup_steps`` the scaled rate is
    reached gradually."""
    warmup_steps: int = 0
    """Gradual warm-up (Goyal et al.): over the first this many optimizer updates the rate
    rises linearly from ``warmup_start_lr`` to the rate in force (``lr`` after ``scale_lr``),
    then stays there; 0: that rate from the first update."""
    warmup_start_lr: float | None = None
    """Rate of the warm-up's first update; None: ``lr`` as configured, before ``scale_lr``
    multiplies it (so without scaling there is nothing to ramp)."""

    def __post_init__(self) -> None:
        _check(self.name in ("sgd", "momentum", "adam"), "optim.name",
               "must be sgd, momentum or adam", self.name)
        _check(self.lr > 0, "optim.lr", "must be > 0", self.lr)
        _check(0 <= self.momentum < 1, "optim.momentum", "must be in [0, 1)", self.momentum)
        _check(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas), "optim.betas",
               "must be two values in [0, 1)", list(self.betas))
        _check(self.scale_lr in SCALE_LR_RULES, "optim.scale_lr",
               "must be one of " + ", ".join(SCALE_LR_RULES), self.scale_lr)
        _check(self.scale_lr != "sqrt_adam" or self.name == "adam", "optim.scale_lr",
               "sqrt_adam moves Adam's betas and eps, so it needs optim.name=adam",
               self.name)
        _check(self.scale_lr != "legw" or self.warmup_steps > 0, "optim.scale_lr",
               "legw stretches the warm-up, so it needs optim.warmup_steps > 0 (its length at "
               "one worker)", self.warmup_steps)
        _check(self.warmup_steps >= 0, "optim.warmup_steps", "must be >= 0", self.warmup_steps)
        if self.warmup_start_lr is not None:
            _check(self.warmup_start_lr >= 0, "optim.warmup_start_lr", "must be >= 0",
                   self.warmup_start_lr)
