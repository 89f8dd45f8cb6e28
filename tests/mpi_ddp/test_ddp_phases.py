"""What a DDP rank tells the step watchdog it is doing (``strategy.phase``), seen from inside
torch's own forward, backward and update: its forward and update are its own compute (a rank
overrunning there is the slow one), its backward also waits for the bucket allreduces
(``overlapped``: the watchdog gives it the grace of a waiting rank, so a rank waiting on a slow
peer does not blame itself)."""

from __future__ import annotations

from hvdscale.frameworks.torch.ddp import DDPStrategy
from tests.exactness import adapter, config, plan


def test_forward_is_compute_and_backward_is_overlapped(comm_world) -> None:
    cfg = config("torch", "ddp")
    mine = adapter(cfg)
    strategy = DDPStrategy(cfg.strategy.ddp, comm_world)
    strategy.setup(mine)
    seen: dict[str, set[str]] = {"forward": set(), "backward": set(), "update": set()}
    mine.model.register_forward_hook(lambda *_: seen["forward"].add(strategy.phase))
    for p in mine.model.parameters():
        p.register_hook(lambda g: seen["backward"].add(strategy.phase))
    # The optimizer's update after the backward is this rank's own compute again.
    mine.optimizer.register_step_pre_hook(lambda *_: seen["update"].add(strategy.phase))
    batches = plan(cfg, comm_world.rank, comm_world.size).batches()
    for _ in range(2):
        strategy.step(next(batches))
        assert strategy.phase == "compute"  # between steps: nothing to wait for
    strategy.finish()
    assert seen == {"forward": {"compute"}, "backward": {"overlapped"}, "update": {"compute"}}, \
        seen


def test_ddp_step_marks_are_ordered_times(comm_world) -> None:
    """The marks a DDP step keeps for the record (its ``step_times``: start, backward start,
    backward end, end) are ordered times of this epoch: the record holds them as the step's
    timeline (issue 50: their mutants survived as "timing only")."""
    cfg = config("torch", "ddp")
    strategy = DDPStrategy(cfg.strategy.ddp, comm_world)
    strategy.setup(adapter(cfg))
    batches = plan(cfg, comm_world.rank, comm_world.size).batches()
    for _ in range(3):
        strategy.step(next(batches))
    marks = strategy.info()["step_times"]
    strategy.finish()
    assert len(marks) == 3, marks
    for m in marks:
        assert all(isinstance(t, float) for t in m), m
        assert m[0] <= m[1] <= m[2] <= m[3], m
        assert m[3] - m[0] < 60  # seconds of this epoch, not 0 or a sum
