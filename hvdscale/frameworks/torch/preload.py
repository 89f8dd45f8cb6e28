"""Work a process pays once, on first use, done at start-up instead (``preload``)."""

from __future__ import annotations

import torch


def preload() -> None:
    """One throwaway optimizer step on a one-element parameter.

    torch's first ``Optimizer.step`` of a process imports ``torch._dynamo`` (1.3 s here; most of
    the 6.3-s model phase on the lent GPU host): done here, it is charged to the launch's
    start-up, once, and not to the first point's set-up or warm-up.
    """
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=0.0)
    p.grad = torch.zeros(1)
    opt.step()
