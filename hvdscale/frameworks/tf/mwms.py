"""TensorFlow's own data parallelism: ``tf.distribute.MultiWorkerMirroredStrategy`` (``mwms``).

A custom training loop, no Keras: one ``tf.function`` per step runs ``strategy.run`` on the
adapter's model (the same model code as the Horovod path), sums the gradients over the workers
with the replica context's ``all_reduce`` and applies the run's optimizer (the adapter's, with
PyTorch's update rules). The workers are the launcher's ranks; TF_CONFIG is agreed over MPI
(``tf_config``), so Horovod is never started and torch never imported.

Token weighting is exact, as Horovod's: the global token count is all-reduced first (its own
small graph call, marked as communication so the watchdog can tell a waiting rank from a stuck
one), every rank scales its summed loss by 1/global_tokens, and the summed gradients are the
single-process gradient of the union of the batches. A rank without a batch (epoch mode) runs
the same traced step on a two-token batch with scale 0: exact zeros in the same collectives.

TensorFlow starts MWMS's worker server and configures its collectives once per process, before
its runtime starts: the strategy object is made once (``native``), and later runs in the same
process must ask for the same settings (anything else is refused, not silently ignored).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import tensorflow as tf

from hvdscale.config.strategy import MWMSConfig, StrategyConfig
from hvdscale.corpora.corpus import Batch, collate
from hvdscale.errors import ConfigError, HvdscaleError
from hvdscale.frameworks.tf.adapter import TFAdapter
from hvdscale.frameworks.tf.tf_config import agree_tf_config, exported
from hvdscale.strategies.base import Strategy

SUM = tf.distribute.ReduceOp.SUM
_IMPL = {"auto": "AUTO", "ring": "RING", "nccl": "NCCL"}
_NATIVE: dict[str, Any] = {}
"""This process's one MWMS: ``cfg`` it was made with, ``strategy``, ``tf_config``."""


def _options(cfg: MWMSConfig) -> tf.distribute.experimental.CommunicationOptions:
    impl = getattr(tf.distribute.experimental.CommunicationImplementation,
                   _IMPL[cfg.communication])
    return tf.distribute.experimental.CommunicationOptions(
        bytes_per_pack=int(cfg.bytes_per_pack_mb * 2**20),
        timeout_seconds=cfg.timeout_s or None, implementation=impl)


def native(cfg: MWMSConfig, world: Any) -> tuple[tf.distribute.Strategy, dict[str, Any]]:
    """This process's ``MultiWorkerMirroredStrategy`` and its TF_CONFIG, made on first use.

    Raises:
        ConfigError: NCCL on a rank without a GPU; a launch without an MPI world; settings other
            than those the process's MWMS was made with.
        HvdscaleError: TensorFlow's runtime started before the strategy could be made.
    """
    if _NATIVE:
        if _NATIVE["cfg"] != cfg:
            raise ConfigError(f"strategy.mwms settings {cfg} differ from {_NATIVE['cfg']}, "
                              "this process's MultiWorkerMirroredStrategy: TensorFlow starts "
                              "its worker server and configures its collectives once per "
                              "process; run these settings in a new process")
        return _NATIVE["strategy"], _NATIVE["tf_config"]
    if cfg.communication == "nccl" and not tf.config.get_visible_devices("GPU"):
        raise ConfigError("strategy.mwms.communication=nccl needs a GPU (device cuda); this "
                          "rank sees none: use ring or auto")
    if getattr(world, "backend", "") != "mpi":
        raise ConfigError("strategy.name=mwms needs an MPI launch (mpirun, srun --mpi=pmix, or "
                          "horovodrun without --gloo): its TF_CONFIG is agreed over MPI")
    conf = agree_tf_config(world, cfg.port)
    try:
        with exported(conf):  # the resolver reads TF_CONFIG once, here
            strategy = tf.distribute.MultiWorkerMirroredStrategy(  # hvd: starts gRPC server
                communication_options=_options(cfg))
    except RuntimeError as e:  # collectives are configured before the runtime's first op
        raise HvdscaleError(f"strategy.name=mwms could not start ({e}): TensorFlow's runtime "
                            "was already running in this process") from None
    if strategy.num_replicas_in_sync != world.size:
        raise HvdscaleError(f"MultiWorkerMirroredStrategy has {strategy.num_replicas_in_sync} "
                            f"replicas for {world.size} ranks: one device per rank expected")
    _NATIVE.update(cfg=cfg, strategy=strategy, tf_config=conf)
    return strategy, conf


class MWMSTF(Strategy):
    """``MultiWorkerMirroredStrategy`` over the TF adapter's model and optimizer."""

    name = "mwms"
    adapter: TFAdapter

    def __init__(self, cfg: MWMSConfig, world: Any) -> None:
        self.cfg = cfg
        self.rank, self.size = world.rank, world.size
        self.mwms, self.tf_config = native(cfg, world)

    def setup(self, adapter: TFAdapter) -> None:  # type: ignore[override]
        super().setup(adapter)
        self._variables = adapter.variables + adapter.optimizer_variables
        with self.communicating():
            self._broadcast()
        # No autograph: the steps have no tensor-dependent Python control flow to convert.
        self._tokens = tf.function(self._tokens_fn, autograph=False,
                                   input_signature=[tf.TensorSpec([], tf.float64)])
        self._train = tf.function(self._train_fn, autograph=False,
                                  input_signature=adapter.train_signature())
        sent = np.array([4, 4], dtype=np.int64)  # the first non-special token id, twice
        self._zero_batch = collate([sent], None if adapter.kind == "lm" else [sent],
                                   adapter.kind)

    # --- traced: each runs ``strategy.run`` on this worker's one replica ----------------------

    def _broadcast(self) -> None:
        """Worker 0's parameters and optimizer state to every worker (a sum in which the other
        workers add exact zeros), so every replica starts identical, as Horovod's broadcast."""
        root = tf.constant(self.rank == 0)
        variables = self._variables

        def replica() -> None:
            mine = [tf.where(root, v, tf.zeros_like(v)) for v in variables]
            summed = tf.distribute.get_replica_context().all_reduce(SUM, mine)  # hvd:
            for v, s in zip(variables, summed, strict=True):
                v.assign(s)

        tf.function(lambda: self.mwms.run(replica), autograph=False)()

    def _tokens_fn(self, own: tf.Tensor) -> tf.Tensor:
        """The global token count (float64: exact for any count a run reaches)."""
        def replica(x: tf.Tensor) -> tf.Tensor:
            # identity: placed on the replica's device (a reduction needs a destination device)
            return tf.distribute.get_replica_context().all_reduce(SUM, tf.identity(x))  # hvd:

        return self.mwms.run(replica, args=(own,))

    def _train_fn(self, src: tf.Tensor, src_len: tf.Tensor, tgt_in: tf.Tensor,
                  tgt_out: tf.Tensor, tgt_len: tf.Tensor, scale: tf.Tensor) -> tf.Tensor:
        """Forward, backward, the gradients summed over the workers, the optimizer's update."""
        model, variables, optimizer = self.adapter.model, self.adapter.variables, \
            self.adapter.optimizer

        def replica(*inputs: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss, _ = model(*inputs)
                scaled = loss * scale
            # Embedding gradients arrive as IndexedSlices: dense, so one all-reduce takes all.
            grads = [tf.convert_to_tensor(g) if g is not None else tf.zeros_like(v)
                     for g, v in zip(tape.gradient(scaled, variables), variables, strict=True)]
            summed = tf.distribute.get_replica_context().all_reduce(SUM, grads)  # hvd:
            optimizer.apply(summed, variables)
            return loss

        return self.mwms.run(replica, args=(src, src_len, tgt_in, tgt_out, tgt_len))

    # --- the step ----------------------------------------------------------------------------

    def _global_tokens(self, own: float) -> float:
        with self.communicating():
            return float(self._tokens(tf.constant(own, tf.float64)))

    def step(self, batch: Batch | None) -> float:
        total = self._global_tokens(float(batch.loss_tokens) if batch is not None else 0.0)
        if total == 0:  # no rank has a batch: no update, as one process would do
            return 0.0
        # The same float32 scale as Horovod's path: 1/total rounded once, from float64.
        scale = tf.constant(1.0 / total if batch is not None else 0.0, tf.float32)
        inputs = self.adapter.train_inputs(batch if batch is not None else self._zero_batch)
        t0 = time.perf_counter()
        self.phase = "overlapped"  # one graph call computes and all-reduces (the watchdog)
        try:
            loss = float(self._train(*inputs, scale))  # waits for the graph call to finish
        finally:
            self.phase = "compute"
        self.adapter.compute_s += time.perf_counter() - t0
        return loss if batch is not None else 0.0

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "communication": self.cfg.communication,
                "port": self.cfg.port, "bytes_per_pack_mb": self.cfg.bytes_per_pack_mb,
                "timeout_s": self.cfg.timeout_s,
                "workers": list(self.tf_config["cluster"]["worker"]),
                "replicas_in_sync": int(self.mwms.num_replicas_in_sync),
                "integration": "strategy.run in a tf.function; all_reduce SUM in the replica "
                               "context; token count all-reduced first",
                "compute_includes_allreduce": True}



def make_native_strategy(cfg: StrategyConfig, world: Any) -> MWMSTF:
    """TensorFlow's own data parallelism for ``cfg`` (its ``mwms`` section) on ``world``."""
    return MWMSTF(cfg.mwms, world)
