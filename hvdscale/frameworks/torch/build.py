"""The PyTorch model of a run: a shipped one (``hvdscale.models.torch``) or the user's own
(``model.kind: custom``, ``hvdscale.models.custom``), checked against the models' contract
before any rank trains: an ``nn.Module`` with trainable parameters whose forward takes a batch
and returns (summed token loss as a float scalar, token count as an integer)."""

from __future__ import annotations

from types import ModuleType

import torch
from torch import nn

from hvdscale.config import ModelConfig
from hvdscale.corpora.corpus import probe_batch
from hvdscale.errors import HvdscaleError
from hvdscale.models import EMBEDDING_INPUTS, ModelSizes
from hvdscale.models.custom import call_builder, declared_embeddings
from hvdscale.models.torch import build_model


def build(model_cfg: ModelConfig, sizes: ModelSizes) -> tuple[nn.Module, dict[str, str]]:
    """The model and its embedding tables (parameter name -> batch field it looks up)."""
    if model_cfg.kind != "custom":
        return (build_model(model_cfg.kind, model_cfg.rnn_impl, sizes),
                EMBEDDING_INPUTS[model_cfg.kind])
    model, module = call_builder(model_cfg, sizes, model_cfg.rnn_impl)
    check_module(model_cfg, model, module)
    return model, declared_embeddings(model_cfg, module)


def check_module(model_cfg: ModelConfig, model: object, module: ModuleType) -> None:
    """Refuse a builder's result that is not an ``nn.Module`` with trainable parameters."""
    if not isinstance(model, nn.Module):
        raise HvdscaleError(f"model.builder {model_cfg.builder!r} returned "
                            f"{type(model).__name__}, not a torch.nn.Module (framework=torch)")
    if not any(p.requires_grad for p in model.parameters()):
        raise HvdscaleError(f"model.builder {model_cfg.builder!r} built a model with no "
                            "trainable parameters")


def check_outputs(builder: str | None, out: object) -> None:
    """Refuse a forward's result that is not (float scalar loss, integer scalar count)."""
    where = f"model.builder {builder!r}: forward"
    if not isinstance(out, tuple | list) or len(out) != 2:
        raise HvdscaleError(f"{where} must return (summed token loss, token count) "
                            f"(got {type(out).__name__})")
    loss, count = out
    if not (isinstance(loss, torch.Tensor) and loss.dim() == 0 and loss.is_floating_point()):
        got = (f"a {loss.dtype} tensor of shape {list(loss.shape)}"
               if isinstance(loss, torch.Tensor) else type(loss).__name__)
        raise HvdscaleError(f"{where}'s loss must be a float scalar tensor, the summed token "
                            f"loss (got {got})")
    ok = isinstance(count, int) and not isinstance(count, bool)
    if isinstance(count, torch.Tensor):
        ok = count.dim() == 0 and not count.is_floating_point() and count.dtype != torch.bool
    if not ok:
        got = (f"a {count.dtype} tensor of shape {list(count.shape)}"
               if isinstance(count, torch.Tensor) else repr(count))
        raise HvdscaleError(f"{where}'s token count must be an integer scalar (got {got})")


def probe(model_cfg: ModelConfig, model: nn.Module, device: torch.device) -> None:
    """One forward of a probe batch (no gradients) whose outputs must keep the contract."""
    b = probe_batch(model_cfg.data_kind)
    args = {k: None if v is None else torch.from_numpy(v).to(device)
            for k, v in (("src", b.src), ("src_len", b.src_len), ("tgt_in", b.tgt_in),
                         ("tgt_out", b.tgt_out), ("tgt_len", b.tgt_len))}
    with torch.no_grad():
        check_outputs(model_cfg.builder, model(**args))
