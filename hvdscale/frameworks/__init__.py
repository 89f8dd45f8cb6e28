"""Framework packages behind one seam; ``load_framework`` picks one by name.

Each framework is a package ``hvdscale.frameworks.<name>`` imported only when asked for, so a
TensorFlow run never imports torch and a PyTorch run never imports tensorflow.

Adding a framework (the checklist; ``tests/unit/test_frameworks.py`` checks every registered
framework provides every hook):

1. ``hvdscale/frameworks/<name>/``: an adapter implementing ``hvdscale.strategies.base.Adapter``,
   a ``horovod`` module (a ``hvdscale.strategies.horovod.HorovodBase`` subclass and the
   ``hvdscale.core.world.HorovodCollectives`` of the framework's Horovod integration), and the
   module-level hooks of ``hvdscale.frameworks.base.Framework`` in the package's ``__init__``,
   a ``gemm`` module (``backend(threads)``: the RNN GEMMs for ``hvdscale gemm``), a
   ``profile`` module (``profile_steps``: op and kernel counts for ``hvdscale profile``) and
   the framework's own data parallelism (``make_native_strategy``; its traits in
   ``hvdscale.registry``);
2. ``hvdscale/models/<name>/`` (the top-level ``models/`` links there): the seq2seq and LM
   models with the shared parameter order;
3. one entry in ``hvdscale.registry.LIBRARIES`` (its name and the library it imports).
"""

from __future__ import annotations

import importlib

from hvdscale.frameworks.base import Framework
from hvdscale.registry import check_framework


def load_framework(name: str) -> Framework:
    """The framework package ``name`` (one of ``hvdscale.registry.FRAMEWORKS``)."""
    check_framework(name)
    return importlib.import_module(f"hvdscale.frameworks.{name}")  # type: ignore[return-value]


__all__ = ["Framework", "load_framework"]
