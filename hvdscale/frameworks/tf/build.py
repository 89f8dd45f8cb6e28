"""The TensorFlow model of a run: a shipped one (``hvdscale.models.tf``) or the user's own
(``model.kind: custom``, ``hvdscale.models.custom``), checked against the models' contract
before any rank trains: a ``tf.Module`` with trainable variables whose call takes a batch and
returns (summed token loss as a float scalar, token count as an integer)."""

from __future__ import annotations

from typing import Any

from hvdscale.config import ModelConfig
from hvdscale.corpora.corpus import probe_batch
from hvdscale.errors import HvdscaleError
from hvdscale.frameworks.tf.quiet import tf
from hvdscale.frameworks.tf.step import batch_inputs
from hvdscale.models import EMBEDDING_INPUTS, ModelSizes
from hvdscale.models.custom import call_builder, declared_embeddings
from hvdscale.models.tf import build_model


def build(model_cfg: ModelConfig, sizes: ModelSizes) -> tuple[Any, dict[str, str]]:
    """The model (initial values from ``model.seed``) and its embedding tables (parameter
    name -> batch field it looks up)."""
    if model_cfg.kind != "custom":
        return (build_model(model_cfg.kind, model_cfg.rnn_impl, sizes, model_cfg.seed),
                EMBEDDING_INPUTS[model_cfg.kind])
    model, module = call_builder(model_cfg, sizes, model_cfg.rnn_impl, model_cfg.seed)
    if not isinstance(model, tf.Module):
        raise HvdscaleError(f"model.builder {model_cfg.builder!r} returned "
                            f"{type(model).__name__}, not a tf.Module (framework=tf)")
    if not model.trainable_variables:
        raise HvdscaleError(f"model.builder {model_cfg.builder!r} built a model with no "
                            "trainable variables")
    if not callable(model):
        raise HvdscaleError(f"model.builder {model_cfg.builder!r} returned a tf.Module "
                            "without __call__(src, src_len, tgt_in, tgt_out, tgt_len)")
    return model, declared_embeddings(model_cfg, module)


def param_names(model: Any) -> list[str]:
    """Names of ``model.trainable_variables``: the shipped models' dotted names, else each
    variable's own name (``:0`` dropped; a repeated name numbered, so names stay unique)."""
    if hasattr(model, "param_names"):
        return list(model.param_names())
    names: list[str] = []
    for v in model.trainable_variables:
        base = v.name.split(":")[0]
        name, k = base, 1
        while name in names:
            name, k = f"{base}_{k}", k + 1
        names.append(name)
    return names


def check_outputs(builder: str | None, out: object) -> None:
    """Refuse a call's result that is not (float scalar loss, integer scalar count)."""
    where = f"model.builder {builder!r}: the model's call"
    if not isinstance(out, tuple | list) or len(out) != 2:
        raise HvdscaleError(f"{where} must return (summed token loss, token count) "
                            f"(got {type(out).__name__})")
    loss, count = (tf.convert_to_tensor(x) if not isinstance(x, int | float) else x
                   for x in out)
    if not (isinstance(loss, tf.Tensor) and loss.shape.rank == 0 and loss.dtype.is_floating):
        got = (f"a {loss.dtype.name} tensor of shape {loss.shape.as_list()}"
               if isinstance(loss, tf.Tensor) else type(loss).__name__)
        raise HvdscaleError(f"{where}'s loss must be a float scalar tensor, the summed token "
                            f"loss (got {got})")
    ok = isinstance(count, int) and not isinstance(count, bool)
    if isinstance(count, tf.Tensor):
        ok = count.shape.rank == 0 and count.dtype.is_integer
    if not ok:
        got = (f"a {count.dtype.name} tensor of shape {count.shape.as_list()}"
               if isinstance(count, tf.Tensor) else repr(count))
        raise HvdscaleError(f"{where}'s token count must be an integer scalar (got {got})")


def probe(model_cfg: ModelConfig, model: Any) -> None:
    """One eager call on a probe batch (the traced step's int32 inputs) whose outputs must keep
    the contract."""
    inputs = [tf.constant(a) for a in batch_inputs(probe_batch(model_cfg.data_kind))]
    check_outputs(model_cfg.builder, model(*inputs))


def shapes(model: Any) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of each trainable variable, in ``trainable_variables`` order."""
    return [(n, tuple(int(d) for d in v.shape))
            for n, v in zip(param_names(model), model.trainable_variables, strict=True)]

