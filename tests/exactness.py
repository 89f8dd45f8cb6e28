"""Token-weighted exactness, for every framework: K steps on N ranks must equal one process on
the union of the ranks' batches.

Batches are deliberately uneven (strong scaling with an odd global batch, long-tailed lengths),
so per-rank token counts differ and a plain average of per-rank means would be wrong.

What is compared is the parameters' change from their (shared, seeded) initial values, not the
parameters: these are dominated by the N(0, 1)-scale initialisation, inside which a wrong update
would hide. A negative control proves the tolerance can fail: the update of a plain average of
per-rank mean losses, on the same uneven batches, must lie far outside it.

``tests/mpi/test_exactness.py`` (PyTorch) and ``tests/mpi_tf/test_tf_exactness.py``
(TensorFlow) are thin: they pick the framework, its tolerance and the cases.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hvdscale.config import RunConfig, load_config
from hvdscale.core.batching import (
    BatchPlan,
    build_schedule,
    local_summary,
    make_plan,
    make_schedule,
    per_rank_batch_size,
)
from hvdscale.core.device import CPU, Placement
from hvdscale.core.world import launch_kind
from hvdscale.corpora.corpus import BOS, EOS, Batch, concat_batches, load_corpus
from hvdscale.frameworks import load_framework
from hvdscale.strategies import make_strategy
from hvdscale.strategies.base import Strategy
from tests.exactness_summary import note_strategy

TEST_DEVICE = os.environ.get("HVDSCALE_TEST_DEVICE", "cpu")
"""``cuda`` (evidence/gpu_device.sh on a GPU machine): each rank's replica on its GPU with TF32
off, the one-process reference on the CPU, the same tolerances. Default: the CPU."""
K_STEPS = 3
"""Steps of a fixed-step case (an epoch case runs its whole schedule)."""
NAIVE_MARGIN = 100
"""The negative control must miss by at least this many tolerances."""
FP16_MIN_ERR = 1e-5
"""Below this relative error of the change, half-precision compression did not run. Measured
with these cases (PyTorch, 3-4 steps): uncompressed, float32 sums in another order give
2.4e-7 to 5.2e-7 (Horovod under mpirun and --gloo, np=2 and 3; DDP np=2 and 3); fp16
compression gives 2.4e-4 to 2.8e-4 (Horovod's compression=fp16, both overlaps; DDP's fp16
hook). 1e-5 is 19x above the first and 24x below the second."""
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CUSTOM = {
    "torch": ("model.kind=custom", "model.task=nmt", "model.builder=transformer_nmt:build",
              f"model.builder_path={EXAMPLES / 'torch_transformer_nmt'}", "model.hidden_size=16"),
    "tf": ("model.kind=custom", "model.task=lm", "model.builder=tf_gru_lm:build",
           f"model.builder_path={EXAMPLES / 'tf_gru_lm'}"),
}
"""Overrides that swap the shipped model for a user's own (examples/): a small Transformer
encoder-decoder for PyTorch, a GRU language model for TensorFlow. Appended to a case's
overrides, they make the same exactness case run on a custom model."""


def config(framework: str, strategy: str, *extra: str) -> RunConfig:
    """A tiny NMT run of ``strategy`` whose ranks hold uneven batches."""
    return load_config(None, [
        f"framework={framework}", "model.kind=nmt", "model.embed_dim=16",
        "model.hidden_size=24", "model.src_vocab=50", "model.tgt_vocab=60",
        "model.attention=true", "data.batch_size=7", "data.scaling=strong",
        "data.synthetic.max_len=12", "data.synthetic.mean_len=6",
        "data.synthetic.sentences_per_rank=64", "optim.name=momentum", "optim.lr=0.3",
        f"strategy.name={strategy}", *extra])


def model_overrides(framework: str, model: tuple[str, ...] | str) -> tuple[str, ...]:
    """``model`` as overrides: ``"custom"`` is ``CUSTOM[framework]``, a tuple is itself."""
    return CUSTOM[framework] if model == "custom" else tuple(model)


def adapter(cfg: RunConfig, placement: Placement = CPU) -> Any:
    """A fresh adapter of ``cfg``'s framework (seeded: every call starts from the same values),
    computing in ``cfg.precision`` (tests/precision_cases.py)."""
    return load_framework(cfg.framework).make_adapter(
        cfg.model, cfg.optim, cfg.model.src_vocab, cfg.model.tgt_vocab, placement,
        precision=cfg.precision)


def plan(cfg: RunConfig, widx: int, nworkers: int) -> BatchPlan:
    """Worker ``widx``'s batches (an epoch run's plan as the runner makes it)."""
    corpus = load_corpus(cfg.data, cfg.model.data_kind, cfg.model.src_vocab, cfg.model.tgt_vocab,
                         widx, nworkers)
    if cfg.measure.epochs:
        return make_plan(corpus, cfg.data, cfg.model.data_kind, widx, nworkers)
    return BatchPlan(corpus, cfg.data, cfg.model.data_kind,
                     per_rank_batch_size(cfg.data, widx, nworkers), widx)


def distributed(cfg: RunConfig, world: Any, stage: bool = False) -> tuple[np.ndarray, Strategy]:
    """Train ``cfg``'s strategy on this rank; returns (parameters after, the strategy).

    ``stage`` forces the flat buffers through host staging copies, as on a GPU. The strategy is
    noted first, so that a case skipped on this device counts as skipped (exactness_summary).
    """
    note_strategy(cfg.strategy.name)
    fw = load_framework(cfg.framework)
    strategy = make_strategy(cfg.strategy, world, fw.HorovodStrategy,
                             getattr(fw, "make_native_strategy", None))
    widx = getattr(strategy, "worker_index", world.rank)
    nworkers = getattr(strategy, "num_workers", world.size)
    mine = adapter(cfg, rank_placement(cfg, world, stage))
    strategy.setup(mine)
    p = plan(cfg, widx, nworkers) if strategy.computes else None
    idle_losses: list[float] = []  # checked after the last collective: a rank failing alone
    if cfg.measure.epochs:         # mid-run would leave the others waiting
        _, stream = make_schedule(cfg.measure, p, world, cfg.data.bucketing.mode)
        for batch in stream:
            _step(strategy, batch, idle_losses)
    else:
        batches = p.batches() if p is not None else None
        for _ in range(K_STEPS):
            _step(strategy, next(batches) if batches is not None else None, idle_losses)
    strategy.finish()
    assert not any(idle_losses), f"a step without a batch returned loss {idle_losses}"
    return mine.params_buffer().astype(np.float64), strategy


def _step(strategy: Strategy, batch: Any, idle_losses: list[float]) -> None:
    """One step; what a step without a batch returned goes to ``idle_losses`` (0.0 by
    ``Strategy.step``'s contract)."""
    loss = strategy.step(batch)
    if batch is None:
        idle_losses.append(loss)


def rank_placement(cfg: RunConfig, world: Any, stage: bool) -> Placement:
    """This rank's placement: the CPU, or under ``HVDSCALE_TEST_DEVICE=cuda`` its GPU (true
    fp32: TF32 off), where a Horovod whose NCCL cannot serve ranks sharing a GPU is a skip."""
    if TEST_DEVICE != "cuda":
        return Placement("cpu", stage=stage)
    import torch

    from hvdscale.core.device import resolve_device
    from hvdscale.core.gpu_sharing import check_horovod, gather_groups
    from hvdscale.errors import ConfigError

    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    placement = resolve_device("cuda", torch.cuda.device_count(), world.local_rank,
                               world.local_size)
    groups = gather_groups(world, placement)
    if cfg.strategy.name == "horovod":
        import horovod.torch as hvd

        try:
            check_horovod(groups, bool(hvd.nccl_built()))
        except ConfigError as e:
            pytest.skip(str(e))
    return placement


def shares_host_memory(array: np.ndarray, tensor: Any) -> bool:
    """Whether ``array`` overlaps ``tensor``'s memory. A tensor off the host (a GPU's, or a
    'meta' one) has no host memory to share; a host tensor is looked at through a detached
    view (``.numpy()`` refuses a device tensor and one that requires grad)."""
    if tensor.device.type != "cpu":
        return False
    return bool(np.shares_memory(array, tensor.detach().numpy()))


def one_token_batch() -> Batch:
    """One NMT sentence with one target token: the fewest loss tokens a step can hold."""
    return Batch(src=np.array([[5, 6]]), src_len=np.array([2]), tgt_in=np.array([[BOS]]),
                 tgt_out=np.array([[EOS]]), tgt_len=np.array([1]))


def one_token_or_none(cfg: RunConfig, world: Any, strategy: Strategy, mine: Any, others: str,
                      tol: float, steps_before: int = K_STEPS,
                      before_last: Callable[[], None] | None = None) -> None:
    """Train ``strategy`` (set up on ``mine``) on the first ``steps_before`` uneven steps, then
    one step with a single loss token on rank 0 and no batch elsewhere (``others`` "one token
    in all") or no batch anywhere; assert the parameters are one process's and that a rank
    without a batch returned 0.0, checked after the last collective (``before_last``: called
    just before the last step)."""
    last: list[Batch | None] = [None] * world.size
    if others == "one token in all":
        last[0] = one_token_batch()
    steps = [*worker_steps(cfg, world.size)[:steps_before], last]
    losses = [strategy.step(step[world.rank]) for step in steps[:-1]]
    if before_last is not None:
        before_last()
    losses.append(strategy.step(last[world.rank]))
    strategy.finish()
    check_exact(cfg, mine.params_buffer().astype(np.float64), world.size, tol, steps=steps)
    assert last[world.rank] is not None or losses[-1] == 0.0, losses  # no batch, no loss


def worker_steps(cfg: RunConfig, nworkers: int) -> list[list]:
    """Per step, the batch (or None) of every worker, rebuilt from the agreed schedule."""
    plans = [plan(cfg, w, nworkers) for w in range(nworkers)]
    if cfg.measure.epochs:
        mode = cfg.data.bucketing.mode
        gathered = [local_summary(cfg.measure, p, mode) for p in plans]
        streams = [list(build_schedule(cfg.measure, p, gathered, mode)[1]) for p in plans]
        return [list(step) for step in zip(*streams, strict=True)]
    its = [p.batches() for p in plans]
    return [[next(i) for i in its] for _ in range(K_STEPS)]


def reference(cfg: RunConfig, steps: list[list], naive: bool = False) -> np.ndarray:
    """One process: per step one update on the union of the batches (``naive``: the mean of
    per-worker mean-loss gradients instead, the wrong weighting with uneven batches)."""
    one = adapter(cfg)
    for parts in steps:
        parts = [b for b in parts if b is not None]
        if not parts:
            continue
        one.zero_grad()
        if naive:  # gradients accumulate: the mean of per-worker mean-loss gradients
            for b in parts:
                one.forward_backward(b, 1.0 / (len(parts) * b.loss_tokens))
        else:
            union = concat_batches(parts)
            one.forward_backward(union, 1.0 / union.loss_tokens)
        one.step()
    return one.params_buffer().astype(np.float64)


def rel_change(got: np.ndarray, ref: np.ndarray, init: np.ndarray) -> float:
    """Relative distance of ``got``'s change from ``init`` to ``ref``'s change."""
    d_got, d_ref = got - init, ref - init
    return float(np.linalg.norm(d_got - d_ref) / np.linalg.norm(d_ref))


def judge(params: np.ndarray, init: np.ndarray, ref: np.ndarray, naive: np.ndarray | None,
          tol: float, margin: float = NAIVE_MARGIN) -> float:
    """Assert ``params``' change from ``init`` is ``ref``'s within ``tol`` (relative), and that
    the negative control ``naive`` (the naive per-worker mean's parameters; None: nothing to
    weigh) misses ``ref``'s change by more than ``margin`` tolerances. Returns the error."""
    err = rel_change(params.astype(np.float64), ref.astype(np.float64), init)
    assert err < tol, f"parameter change differs from one process by {err:.2e}"
    if naive is not None:
        wrong = rel_change(naive.astype(np.float64), ref.astype(np.float64), init)
        assert wrong > margin * tol, \
            f"negative control too close ({wrong:.2e}): tolerance too loose"
    return err


def check_exact(cfg: RunConfig, params: np.ndarray, nworkers: int, tol: float,
                steps: list[list] | None = None, margin: float = NAIVE_MARGIN) -> float:
    """Assert ``params`` changed as one process on the union would change them, within ``tol``,
    and that the naive per-worker mean misses by ``margin`` tolerances (skipped with one
    worker: nothing is uneven, nothing to weigh). ``steps``: every worker's batch (or None)
    per step, when the test made them itself (default: ``worker_steps``). Returns the error."""
    steps = worker_steps(cfg, nworkers) if steps is None else steps
    init = adapter(cfg).params_buffer().astype(np.float64)
    naive = None
    if nworkers > 1:
        sizes = {tuple(b.loss_tokens for b in s if b is not None) for s in steps}
        assert any(len(set(s)) > 1 for s in sizes), "test data should be uneven across ranks"
        naive = reference(cfg, steps, naive=True)
    return judge(params, init, reference(cfg, steps), naive, tol, margin)


PS_CASES = [("colocated", 1), ("colocated", 2), ("dedicated", 1)]
"""(placement, servers) of the parameter-server cases."""
PS_MODEL_CASES = [(p, n, ()) for p, n in PS_CASES] + [("colocated", 2, "custom")]
"""``PS_CASES`` on the shipped model (no overrides), and one on the framework's ``CUSTOM``."""


def ps_cases(test: Callable) -> Callable:
    """Mark a test as the parameter-server cases: parametrised by ``PS_MODEL_CASES``, run at
    np=3 too, skipped under ``horovodrun --gloo`` (the parameter server needs an MPI launch)."""
    test = pytest.mark.parametrize("placement,servers,model", PS_MODEL_CASES,
                                   ids=[f"{p}-{n}" + ("-custom" if m else "")
                                        for p, n, m in PS_MODEL_CASES])(test)
    test = pytest.mark.skipif(launch_kind() != "mpi", reason="the parameter server needs an MPI "
                              "launch")(test)
    return pytest.mark.np3(test)


def ps_case(framework: str, placement: str, servers: int, world: Any,
            model: tuple[str, ...] | str = ()) -> tuple[RunConfig, np.ndarray, Strategy]:
    """Train the parameter server with ``servers`` servers placed ``placement`` (on ``model``'s
    overrides; ``"custom"``: ``CUSTOM[framework]``); returns the config, the parameters every
    worker holds (asserted equal) and the strategy. Skips the case when the servers would
    leave no worker."""
    if placement == "dedicated" and servers >= world.size:
        pytest.skip("no worker left")
    cfg = config(framework, "ps", f"strategy.ps.placement={placement}",
                 f"strategy.ps.num_servers={servers}", *model_overrides(framework, model))
    params, strategy = distributed(cfg, world)
    return cfg, worker_params(world, strategy, params), strategy


def identical_replicas(world: Any, params: np.ndarray) -> None:
    """Assert every rank holds the same parameters, bit for bit."""
    everyone = world.allgather(params)
    for p in everyone[1:]:
        assert np.array_equal(p, everyone[0]), "replicas differ"


def worker_params(world: Any, strategy: Strategy, params: np.ndarray) -> np.ndarray:
    """The parameters every worker holds (serve-only ranks hold no replica), asserted equal."""
    everyone = world.allgather((strategy.computes, params))
    held = [p for computes, p in everyone if computes]
    assert len(held) == strategy.num_workers  # type: ignore[attr-defined]
    for p in held:
        assert np.array_equal(p, held[0])
    return held[0]


def request_names(monkeypatch: pytest.MonkeyPatch, hvd: Any, collective: str) -> list[str]:
    """The ``name=`` of every call to ``hvd.<collective>`` from now on (the call goes through):
    the timeline finds the token count's request by its name (issue 50)."""
    names: list[str] = []
    real = getattr(hvd, collective)

    def naming(tensor: Any, *a: Any, name: str | None = None, **k: Any) -> Any:
        names.append(name)
        return real(tensor, *a, name=name, **k)

    monkeypatch.setattr(hvd, collective, naming)
    return names
