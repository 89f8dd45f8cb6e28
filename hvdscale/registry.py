"""The one list of frameworks and of gradient-sharing strategies, read by every layer.

Frameworks: config, sweep, gemm and profile validate against ``FRAMEWORKS``;
``load_framework`` imports ``hvdscale.frameworks.<name>`` for a name listed here. Adding a
framework is a package under ``hvdscale/frameworks/`` (see the checklist in
``hvdscale.frameworks``), a models package, and one entry here.

Strategies: each declares its traits once, as a ``StrategySpec`` (its name, the frameworks it
runs on, the launches it runs under, whether its ranks send anything, its place in the
report, its prediction families, the precisions and RNN implementations it accepts, whether it
can share a launch), read by config validation, the runner, the sweep, the report, predict and
the breakdown. The built-ins are ``BUILTIN`` below (``hvdscale.strategies.builtin`` builds
them); a strategy of your own is a module that calls ``register`` with its spec and builder and
is named in ``HVDSCALE_STRATEGY_PLUGINS`` (comma-separated module names, imported the first
time the table is read, on every rank: the launchers forward ``HVDSCALE_*``).

This module imports nothing of hvdscale but its errors, so every layer (config included) may
read it; a strategy's code is imported only when a run builds it.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hvdscale.errors import HvdscaleError

LIBRARIES: dict[str, str] = {"torch": "torch", "tf": "tensorflow"}
"""Each framework's name and the Python library its package imports (a study tool checks that
the library is installed without importing it: importing one framework before another is
timed would change what is measured)."""

FRAMEWORKS: tuple[str, ...] = tuple(LIBRARIES)
"""Framework names, in the order reports list them: PyTorch, TensorFlow."""


def check_framework(name: str, key: str = "framework") -> str:
    """``name`` if it is a registered framework, else ValueError naming ``key`` and the choices."""
    if name not in FRAMEWORKS:
        raise ValueError(f"{key} must be one of {', '.join(FRAMEWORKS)} (got {name!r})")
    return name


TORCHRUN_UNDECLARED = ("it does not declare that it runs without MPI or Horovod (a strategy "
                       "that needs only torch.distributed registers with torchrun=\"\")")
"""Why a strategy that says nothing of torchrun is refused there."""

PLUGINS_ENV = "HVDSCALE_STRATEGY_PLUGINS"
"""Comma-separated modules imported after the built-ins; each registers its strategies."""

ALLREDUCE_FAMILIES = ("ring", "ring-bandwidth", "tree", "shared-link", "sync",
                      "shared-link+straggler")
"""Prediction families of an allreduce (``hvdscale.study.predict.families.FAMILIES``)."""


@dataclass(frozen=True)
class Hooks:
    """What the framework in use lends a strategy's builder."""

    horovod: Callable[..., Any] | None = None
    """The framework's Horovod strategy class, called with ``cfg.horovod``."""
    native: Callable[..., Any] | None = None
    """The framework's own data parallelism (its ``make_native_strategy``), ``(cfg, world)``."""


Builder = Callable[[Any, Any, Hooks], Any]
"""``build(strategy_config, world, hooks) -> Strategy``."""


@dataclass(frozen=True)
class StrategySpec:
    """One strategy's traits, declared once."""

    name: str
    """``strategy.name`` in configs, records and reports."""
    about: str
    """What it is, in a few words (error messages say it)."""
    build: Builder | None = None
    """Makes the strategy for a run (a plugin's; import the strategy's code inside, not at
    module level). None: a built-in, built by ``hvdscale.strategies.builtin``."""
    frameworks: tuple[str, ...] = FRAMEWORKS
    """Frameworks it runs on."""
    mpi: str = ""
    """Why it cannot run under ``horovodrun --gloo``, which starts no MPI job (empty: it
    can)."""
    torchrun: str = TORCHRUN_UNDECLARED
    """Why it cannot run under ``torchrun``, which starts no MPI job and no Horovod (empty:
    it can; a strategy that needs only torch.distributed and the harness's world says so)."""
    sends: bool = True
    """Whether its ranks exchange anything; False (independent replicas): no exposed
    communication in the breakdown and no shared model for the noise scale."""
    order: int = 5
    """Place among the report's series of one framework (smaller first; ties by name)."""
    families: tuple[str, ...] = ALLREDUCE_FAMILIES
    """Prediction families of its communication, the first the default when the points cannot
    choose."""
    overlaps: bool = False
    """Whether its communication may run during backward (predict counts only the excess)."""
    precisions: tuple[str, ...] | None = None
    """The ``precision`` values it accepts (None: all)."""
    rnn_impls: tuple[str, ...] | None = None
    """The ``model.rnn_impl`` values it accepts (None: all)."""
    refuses: str = ""
    """Why it refuses the precisions or RNN implementations it leaves out."""
    alone: str = ""
    """Why a point of it cannot share a launch with other points (empty: it can)."""
    native: bool = False
    """A framework's own data parallelism: it never starts Horovod."""

    @property
    def needs_mpi(self) -> bool:
        """Whether it needs more than ``horovodrun --gloo`` gives (an MPI launch or torchrun)."""
        return bool(self.mpi)

    @property
    def launches(self) -> tuple[str, ...]:
        """The launches it runs under (``hvdscale.core.world.LAUNCHES``)."""
        why = {"mpi": "", "gloo": self.mpi, "torchrun": self.torchrun}
        return tuple(k for k, v in why.items() if not v)


def launch_refusal(spec: StrategySpec, launch: str) -> str:
    """The one line that refuses ``spec`` under ``launch`` (``hvdscale.core.world.launch_kind``:
    ``mpi``, ``gloo``, ``torchrun``), saying why and what to launch instead; empty when it
    runs there."""
    if launch in spec.launches:
        return ""
    if launch == "gloo":  # the words the MPI-only strategies have always been refused in
        also = ", or torchrun" if "torchrun" in spec.launches else ""
        return (f"strategy.name={spec.name} needs an MPI launch (mpirun, srun --mpi=pmix, or "
                f"horovodrun without --gloo{also}): {spec.mpi}")
    return (f"strategy.name={spec.name} does not run under torchrun: {spec.torchrun}; launch "
            f"it with mpirun, srun --mpi=pmix or horovodrun (hvdscale sweep --launcher mpirun)")


_SPECS: dict[str, StrategySpec] = {}
_loaded = False


def register(spec: StrategySpec) -> StrategySpec:
    """Add ``spec`` to the table (after those already there); returns it.

    Raises:
        HvdscaleError: its name is taken, or names a framework that does not exist.
    """
    # The built-ins first, so a plugin imported before the table was read comes after them.
    if spec.name in _table():
        raise HvdscaleError(f"strategy {spec.name!r} is registered twice")
    unknown = [f for f in spec.frameworks if f not in FRAMEWORKS]
    if unknown or not spec.frameworks:
        raise HvdscaleError(f"strategy {spec.name!r}: frameworks must be among "
                            f"{', '.join(FRAMEWORKS)} (got {list(spec.frameworks)})")
    _SPECS[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove ``name`` from the table (a test that registered it cleans up)."""
    _SPECS.pop(name, None)


def load_plugins(modules: str) -> None:
    """Import each of the comma-separated ``modules`` (each registers its strategies).

    Raises:
        HvdscaleError: one of them cannot be imported, or its import raised (the message
            names the module, the exception and the line; no traceback).
    """
    for module in (m.strip() for m in modules.split(",")):
        if not module:
            continue
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise HvdscaleError(f"{PLUGINS_ENV}: cannot import {module!r} ({e})") from None
        except Exception as e:  # the plugin's own code failed while it loaded: name it, briefly
            raise HvdscaleError(f"{PLUGINS_ENV}: importing {module!r} raised "
                                f"{type(e).__name__}: {e} ({_where(e)})") from None


def _where(e: BaseException) -> str:
    """The plugin's file and line the exception came from (its innermost frame)."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:  # pragma: no cover - a raised exception always has a frame
        return "no frame"
    return f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"


def _table() -> dict[str, StrategySpec]:
    """The table, with the built-ins and the plugins loaded on first use."""
    global _loaded
    if not _loaded:
        _loaded = True  # first: a plugin that reads the table while it loads sees the built-ins
        for spec in BUILTIN:
            _SPECS.setdefault(spec.name, spec)
        load_plugins(os.environ.get(PLUGINS_ENV, ""))
    return _SPECS


def names() -> tuple[str, ...]:
    """Every strategy's name, in the order registered (the built-ins first)."""
    return tuple(_table())


def find(name: str) -> StrategySpec | None:
    """The strategy ``name``, or None (a record may name one this process does not know)."""
    return _table().get(name)


def get(name: str) -> StrategySpec:
    """The strategy ``name``.

    Raises:
        HvdscaleError: no such strategy (the message names the known ones).
    """
    spec = find(name)
    if spec is None:
        raise HvdscaleError(f"unknown strategy {name!r}; known: {', '.join(names())}")
    return spec


def native_for(framework: str) -> str | None:
    """The name of ``framework``'s own data-parallel strategy (None: it has none)."""
    return next((s.name for s in _table().values()
                 if s.native and s.frameworks == (framework,)), None)


def order_key(name: str) -> tuple[int, str]:
    """Where ``name`` goes among a report's series (an unknown name last)."""
    spec = find(name)
    return (spec.order if spec is not None else 99, name)


BUILTIN: tuple[StrategySpec, ...] = (
    StrategySpec("horovod", "Horovod's allreduce", order=1, overlaps=True,
                 torchrun="Horovod's ranks are started by horovodrun or an MPI launcher, "
                          "and torchrun starts neither an MPI job nor Horovod's gloo "
                          "rendezvous"),
    StrategySpec("independent", "independent replicas (no communication: the ideal case)",
                 sends=False, order=0, families=("none", "straggler", "contention"),
                 torchrun=""),
    StrategySpec(
        "ps", "the MPI parameter server", order=3,
        mpi="its workers and servers exchange gradients and parameters by MPI point-to-point",
        torchrun="its workers and servers exchange gradients and parameters by MPI "
                 "point-to-point, and torchrun starts no MPI job",
        families=("ps", "shared-link", "sync", "shared-link+straggler"),
        precisions=("fp32", "tf32", "bf16"),
        refuses="each server updates its own shard, so a step skipped for an overflow could not "
                "be agreed (use bf16)"),
    StrategySpec(
        "ddp", "PyTorch's DistributedDataParallel", frameworks=("torch",), native=True,
        mpi="under horovodrun --gloo there is no MPI to agree torch.distributed's "
            "MASTER_ADDR/MASTER_PORT over", torchrun="",  # torchrun's store is its rendezvous
        order=2, overlaps=True),  # ring allreduce over buckets, overlapped with backward
    StrategySpec(
        "mwms", "TensorFlow's MultiWorkerMirroredStrategy", frameworks=("tf",),
        native=True, mpi="under horovodrun --gloo there is no MPI to agree TF_CONFIG over",
        torchrun="TensorFlow's TF_CONFIG is agreed over MPI, and torchrun starts no MPI job",
        order=2, overlaps=True,  # a ring of collective ops
        # TensorFlow's collective runtime cannot be configured again in one process.
        alone="TensorFlow's MultiWorkerMirroredStrategy is set up once per process"),
)
"""The built-in strategies' traits (their builders: ``hvdscale.strategies.builtin``)."""
