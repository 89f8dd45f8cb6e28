"""DDP's join context for ranks that run out of batches (``strategy.ddp.idle=join``).

Every rank enters ``torch.distributed.algorithms.Join`` at the first measured step (warm-up
batches exist on every rank). A rank out of batches leaves the context at its first step
without one: leaving shadows every collective the other ranks still issue (their join count,
the global token count on its own group, DDP's bucket allreduces) until all have left. A rank
with batches leaves after the last measured step, so every rank is out before the harness's
end-of-window barrier. On leaving, DDP copies the parameters of the rank that left last to all
(its post-hook); the joined ranks' optimizer state stays where they left it.

The join count runs on the first joinable's group and device, which the context requires to be
DDP's own (its default group, gloo on CPU, NCCL on a GPU, so the count's tensor lives on DDP's
device). The token count's joinable comes first in the context, so a joined rank shadows a step
in the order the others issue it: join count (DDP's group), tokens (their own gloo group), then
DDP's gradient-sync flag and buckets.

A joined rank waits inside one ``strategy.step`` call until every rank has joined, so the
config refuses what would need it back earlier (``hvdscale.config.run``).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.algorithms.join import Join, Joinable, JoinHook


class _TokensHook(JoinHook):
    """A joined rank's share of one step's token count: zero tokens."""

    def __init__(self, group: Any) -> None:
        self.group = group

    def main_hook(self) -> None:
        dist.all_reduce(torch.zeros(1, dtype=torch.float64), group=self.group)  # hvd:


class TokenCount(Joinable):
    """The global token count's allreduce (on ``group``), as a participant of DDP's join
    context; the context's own join count runs on ``ddp``'s group and device (one group and
    one device per context: NCCL needs the count on the GPU)."""

    def __init__(self, group: Any, ddp: Any) -> None:
        super().__init__()
        self.group = group
        self.ddp = ddp

    def join_hook(self, **kwargs: Any) -> JoinHook:
        return _TokensHook(self.group)

    @property
    def join_device(self) -> torch.device:
        return self.ddp.join_device  # the device DDP's group communicates from

    @property
    def join_process_group(self) -> Any:
        return self.ddp.join_process_group


class JoinControl:
    """When the ranks enter and leave DDP's join context (inactive with ``idle=zero``)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.ctx: Join | None = None
        self.tokens: TokenCount | None = None
        self.window_steps: int | None = None
        self.step = 0
        self.left_at: int | None = None
        """The step at which this rank left the context (None: not yet, or never entered)."""
        self.shadowed_s = 0.0

    def attach(self, ddp: Any, tokens_group: Any) -> None:
        """The DDP model and the token group that take part in the context."""
        self.ddp = ddp
        self.tokens = TokenCount(tokens_group, ddp) if self.enabled else None

    def plan(self, window_steps: int, endless: bool) -> None:
        """The runner's schedule: idle steps exist only in epoch mode (not ``endless``)."""
        self.window_steps = window_steps
        if endless:
            self.enabled = False

    @property
    def active(self) -> bool:
        """Inside the context and not yet left."""
        return self.ctx is not None and self.left_at is None

    def before_step(self, step: int) -> None:
        """The runner's step number (negative: warm-up)."""
        self.step = step

    def begin_step(self) -> None:
        """Enter at the first measured step (at the first step when driven without a
        schedule, as the tests do): warm-up batches exist on every rank."""
        if self.enabled and self.ctx is None and (self.window_steps is None or self.step >= 0):
            self.ctx = Join([self.tokens, self.ddp])  # hvd: the token count first
            self.ctx.__enter__()

    def notify(self) -> None:
        """A rank with a batch tells the context it has not joined (before its collectives)."""
        if self.active:
            assert self.tokens is not None
            Join.notify_join_context(self.tokens)  # hvd: the join count, on DDP's group

    def after_step(self) -> None:
        """After the last measured step, leave (every rank is out before the window closes)."""
        if self.active and self.window_steps is not None and self.step == self.window_steps - 1:
            self.leave()

    def leave(self) -> None:
        """Leave the context: shadow the others' steps until every rank has left."""
        import time

        assert self.ctx is not None
        t = time.perf_counter()
        self.left_at = self.step
        self.ctx.__exit__(None, None, None)  # hvd:
        self.shadowed_s = time.perf_counter() - t

    def finish(self) -> None:
        """Leave if still inside (driven without a schedule)."""
        if self.active:
            self.leave()

    def info(self) -> dict[str, Any]:
        return {"used": self.ctx is not None, "left_at_step": self.left_at,
                "shadowed_s": self.shadowed_s}
