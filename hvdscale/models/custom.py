"""A user's own model (``model.kind: custom``): its builder imported, called and its module's
declarations read, for either framework (no framework is imported here, nor any distribution).

The builder is ``model.builder = "PACKAGE.MODULE:FUNCTION"``; the module is looked up first in
``model.builder_path`` (a config file's own directory by default), then on ``sys.path``. The
function is called as ``build(sizes, rnn_impl)`` for PyTorch and ``build(sizes, rnn_impl, seed)``
for TensorFlow (PyTorch's initial values come from ``torch.manual_seed(model.seed)`` before the
call). Optional declarations in the module, each with a safe default:

* ``EMBEDDINGS = {"embed.weight": "src"}``: parameter name -> the batch field (``src`` or
  ``tgt_in``) whose token ids index that table's rows; default ``{}`` (every gradient dense;
  sparse merging has no table to work on, and ``predict`` counts dense bytes).
* ``RNN_IMPLS = ("fused", "loop")``: the ``model.rnn_impl`` values the builder honours;
  default ``("fused",)`` (one implementation; ``rnn_impl=loop`` is refused).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from hvdscale.errors import HvdscaleError

if TYPE_CHECKING:
    from hvdscale.config import ModelConfig

FIELDS = {"nmt": ("src", "tgt_in"), "lm": ("src",)}
"""Per task, the batch fields an embedding table may look up."""


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def builder_module(model: ModelConfig) -> ModuleType:
    """The builder's module, imported (``builder_path`` first on ``sys.path``).

    Raises:
        HvdscaleError: the import failed; the import error's own message in one line.
    """
    module_name = str(model.builder).partition(":")[0]
    if model.builder_path and model.builder_path not in sys.path:
        sys.path.insert(0, model.builder_path)
    try:
        return importlib.import_module(module_name)
    except Exception as e:  # any error of the user's module: one line, not a traceback
        raise HvdscaleError(f"model.builder {model.builder!r} cannot be imported: "
                            f"{_one_line(e)}") from None


def builder_function(model: ModelConfig) -> tuple[Callable[..., Any], ModuleType]:
    """The builder function and its module; HvdscaleError if it is not there or not callable."""
    module = builder_module(model)
    func_name = str(model.builder).partition(":")[2]
    func = getattr(module, func_name, None)
    if not callable(func):
        raise HvdscaleError(f"model.builder {model.builder!r}: module {module.__name__!r} has "
                            f"no function {func_name!r}")
    rnn_impls(model, module)  # refuse an rnn_impl the module does not declare before building
    return func, module


def call_builder(model: ModelConfig, *args: Any) -> tuple[Any, ModuleType]:
    """``builder(*args)`` and the builder's module; an exception the builder raises becomes
    one line naming the builder (with where in the user's file it was raised)."""
    func, module = builder_function(model)
    try:
        return func(*args), module
    except HvdscaleError:
        raise
    except Exception as e:
        tb, where = e.__traceback__, ""
        while tb is not None:
            where = f" ({tb.tb_frame.f_code.co_filename}:{tb.tb_lineno})"
            tb = tb.tb_next
        raise HvdscaleError(f"model.builder {model.builder!r} raised {_one_line(e)}{where}") \
            from None


def rnn_impls(model: ModelConfig, module: ModuleType) -> tuple[str, ...]:
    """The module's ``RNN_IMPLS`` (default ``("fused",)``), refusing ``model.rnn_impl`` if it is
    not among them."""
    impls = tuple(getattr(module, "RNN_IMPLS", ("fused",)))
    if model.rnn_impl not in impls:
        raise HvdscaleError(f"model.rnn_impl={model.rnn_impl}: the builder's module "
                            f"{module.__name__!r} declares RNN_IMPLS={impls!r} (declare "
                            "RNN_IMPLS = (\"fused\", \"loop\") if the builder honours both)")
    return impls


def declared_embeddings(model: ModelConfig, module: ModuleType) -> dict[str, str]:
    """The module's ``EMBEDDINGS`` (default ``{}``), each field checked against the task."""
    decl = getattr(module, "EMBEDDINGS", {}) or {}
    if not isinstance(decl, Mapping):
        raise HvdscaleError(f"model.builder {model.builder!r}: EMBEDDINGS must map parameter "
                            f"names to batch fields (got {type(decl).__name__})")
    allowed = FIELDS[model.data_kind]
    for name, field in decl.items():
        if field not in allowed:
            raise HvdscaleError(f"model.builder {model.builder!r}: EMBEDDINGS[{name!r}] must be "
                                f"one of {', '.join(allowed)} for task {model.data_kind} "
                                f"(got {field!r})")
    return {str(k): str(v) for k, v in decl.items()}


def check_embeddings(model: ModelConfig, decl: Mapping[str, str],
                     shapes: list[tuple[str, tuple[int, ...]]], rows: Mapping[str, int]) -> None:
    """Each declared table is a parameter whose first dimension is its field's vocabulary."""
    have = dict(shapes)
    for name, field in decl.items():
        if name not in have:
            known = ", ".join(n for n, _ in shapes[:12])
            raise HvdscaleError(f"model.builder {model.builder!r}: EMBEDDINGS names {name!r}, "
                                f"which is not a trainable parameter (parameters: {known})")
        shape = have[name]
        if len(shape) != 2 or shape[0] != rows[field]:
            raise HvdscaleError(f"model.builder {model.builder!r}: EMBEDDINGS table {name!r} "
                                f"must be [{rows[field]} (the {field} vocabulary), width] "
                                f"(got {list(shape)})")


def shape_mismatch(mine: list[tuple[str, tuple[int, ...]]],
                   theirs: list[tuple[str, tuple[int, ...]]]) -> str | None:
    """The first difference between two (name, shape) lists in words; None if they agree."""
    for i, (a, b) in enumerate(zip(mine, theirs, strict=False)):
        if tuple(a[1]) != tuple(b[1]) or a[0] != b[0]:
            return f"parameter {i}: {a[0]} {list(a[1])} against {b[0]} {list(b[1])}"
    if len(mine) != len(theirs):
        return f"{len(mine)} parameters against {len(theirs)}"
    return None
