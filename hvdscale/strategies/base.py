"""The seam between strategies and frameworks: ``Adapter``, what every strategy may use of a
framework's model and optimizer, and ``Strategy``, what every gradient-sharing strategy
implements.

An adapter owns one framework's model and optimizer. Everything framework-independent (the
parameter server, independent replicas, the runner, the benchmarks) goes through ``Adapter``
and nothing else. Horovod is the exception by design: it plugs into each framework's own
integration (``hvd.DistributedOptimizer`` for PyTorch, ``hvd.DistributedGradientTape`` for
TensorFlow), so each framework package (``hvdscale.frameworks.<name>.horovod``) has its own
Horovod strategy class, typed against that framework's adapter and using the extra hooks that
adapter documents. The protocol lives here, below the frameworks, so that strategies never
import a framework package.

Flat buffers: ``params_buffer`` and ``grads_buffer`` are float32 numpy arrays, one element per
parameter in ``tensor_sizes`` order, the same array object on every call. PyTorch's are views of
the model's memory (no copies); TensorFlow's variables cannot alias numpy memory, so its
adapter copies into them when asked, and ``params_changed`` copies back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import numpy as np

from hvdscale.corpora.corpus import Batch
from hvdscale.strategies.sparse_rows import EmbeddingTable

Scale = float | Callable[[], float]
"""A loss scale, or a callable evaluated between forward and backward (so a strategy can overlap
the global token count's allreduce with the forward pass where the framework allows it)."""


class ShardOptimizer(Protocol):
    """The run's optimizer over a flat float32 shard of the parameters (the parameter server's).

    The server writes the shard's gradient into ``grad`` and calls ``step``, which updates the
    shard array it was built over, in place, with the same math as the adapter's optimizer.
    """

    grad: np.ndarray
    keeps_zero_grad_rows: bool
    """Whether an element with zero gradient is left unchanged by ``step`` (plain SGD: True;
    momentum and Adam move every element), so a parameter server may pull changed rows only."""

    def step(self) -> None: ...


class Adapter(Protocol):
    """One framework's model and optimizer, as every strategy and the runner see them."""

    framework: str
    """Its framework's name (one of ``hvdscale.registry.FRAMEWORKS``)."""
    num_params: int
    """Parameter count (elements of the flat buffers)."""
    compute_s: float
    """Seconds spent in forward and backward so far (a strategy's waits inside a callable
    ``scale`` excluded): the rank's own work, against which idle time is measured."""

    def tensor_sizes(self) -> list[tuple[str, int]]:
        """(name, element count) of each parameter tensor, in flat-buffer order."""
        ...

    def param_shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        """(name, shape) of each parameter tensor, in flat-buffer order (a custom model's are
        compared with rank 0's before the first step)."""
        ...

    def zero_grad(self) -> None:
        """Zero the gradients (a rank without a batch then contributes exact zeros)."""
        ...

    def forward_backward(self, batch: Batch, scale: Scale) -> float:
        """Add the gradients of ``scale`` x the batch's summed token loss to the current ones
        (as autograd accumulates: ``zero_grad`` first for a fresh step); returns the unscaled
        loss."""
        ...

    def train_step(self, batch: Batch, scale: Scale) -> float:
        """``zero_grad``, ``forward_backward(batch, scale)`` and ``step`` at once, with no
        communication (independent replicas): one graph call where the framework traces
        (TensorFlow); returns the unscaled loss."""
        ...

    def loss(self, batch: Batch) -> float:
        """Summed token loss of ``batch`` without gradients."""
        ...

    def probe_grad(self, batch: Batch) -> np.ndarray:
        """Gradient of ``batch``'s summed token loss as one flat array in ``tensor_sizes``
        order, with no side effect on accumulated gradients, optimizer or communication."""
        ...

    def step(self) -> None:
        """Apply the current gradients with the run's optimizer."""
        ...

    def params_buffer(self) -> np.ndarray:
        """The parameters as one flat float32 array, current as of this call."""
        ...

    def params_changed(self) -> None:
        """Make values written into ``params_buffer()`` the model's parameters."""
        ...

    def grads_buffer(self) -> np.ndarray:
        """The gradients of the last ``forward_backward`` (or zeros after ``zero_grad``) as one
        flat float32 array, current as of this call."""
        ...

    def shard_optimizer(self, shard: np.ndarray) -> ShardOptimizer:
        """An optimizer of the run's kind over ``shard`` (a flat float32 array, updated in
        place)."""
        ...

    def fingerprint(self) -> dict[str, float]:
        """Sum and L2 norm of all parameters (float64), to compare runs from records alone."""
        ...

    def embedding_tables(self) -> list[EmbeddingTable]:
        """The embedding tables in the flat buffers (name, offset, rows, width), in order:
        what a strategy may send as rows instead of dense blocks."""
        ...

    def touched_rows(self, batch: Batch) -> list[np.ndarray]:
        """Per ``embedding_tables()`` entry, the sorted unique row ids whose gradient
        ``forward_backward(batch, ...)`` can make nonzero; every other row's gradient is exactly
        zero (a superset is allowed: an extra row only carries zeros)."""
        ...

    def synchronize(self) -> None:
        """Wait until all work queued on the adapter's device has finished (nothing on CPU).

        The runner calls it where it reads the clock for the measured window and for step
        times, so words/s never counts work still queued on a GPU."""
        ...

    def device_stats(self) -> dict[str, Any]:
        """Device facts for the record: the placement, host-device copy seconds of the
        staged flat buffers (``copy_s``), peak device memory in MiB (None on CPU)."""
        ...


class Strategy:
    """One synchronous training step per call, the same for every strategy.

    ``computes`` is False on ranks that only serve (a dedicated parameter server): they take
    part in ``step`` without a batch. A rank that computes also gets no batch (None) once it
    has run out of batches in an epoch-bounded run (``hvdscale.core.batching``): it still
    takes part in the step, contributing zero gradient and zero tokens, so the update stays the
    exact token-weighted update of the batches that exist and no other rank waits for it in vain.
    """

    synchronous = True
    """Whether ranks meet at every step (False: replicas never wait for each other)."""

    name = "base"
    computes = True
    phase = "compute"
    """``compute`` or ``communicate``: what this rank is doing now (read by the watchdog);
    also ``overlapped`` (both in one call) and ``joined`` (DDP's join context)."""

    @contextmanager
    def communicating(self) -> Iterator[None]:
        """Mark this rank as waiting on the others for the duration (see ``phase``)."""
        self.phase = "communicate"
        try:
            yield
        finally:
            self.phase = "compute"

    def setup(self, adapter: Adapter) -> None:
        """Bring every replica to the same starting point."""
        self.adapter = adapter

    def trace_plan(self, window_steps: int, endless: bool) -> int:
        """Steps to run after the measured window for a trace (0: none, or traced inside it).

        Args:
            window_steps: measured steps (numbered 0 .. window_steps - 1).
            endless: whether batches go on after the window (fixed step count, not epochs).
        """
        return 0

    def before_step(self, step: int) -> None:
        """Called before each step (negative: warm-up), e.g. to open or close a trace."""

    def step(self, batch: Batch | None) -> float:
        """Train on ``batch`` (None: no batch on this rank this step); returns this rank's
        summed loss (0.0 without a batch)."""
        raise NotImplementedError

    def info(self) -> dict[str, Any]:
        """Strategy facts for the run record."""
        return {"name": self.name}

    def finish(self) -> None:
        """Release what the strategy holds once training is over."""

    def close(self) -> None:
        """Release, after the record is written, what would outlive the point in this process
        (a shared launch runs the next point after this; hvdscale.train.teardown)."""
