"""A whole MWMS run on every rank (the runner, in this process): it trains, records, never imports
torch and never starts Horovod; and what MWMS cannot do in one process is refused clearly."""

from __future__ import annotations

import os
import sys
import tempfile

import pytest

from hvdscale.config import load_config
from hvdscale.config.strategy import MWMSConfig
from hvdscale.errors import ConfigError


def _loaded(prefix: str) -> list[str]:
    return sorted(m for m in sys.modules if m == prefix or m.startswith(prefix + "."))


@pytest.mark.np3
def test_mwms_run_records_and_never_loads_torch_or_horovod(comm_world) -> None:
    from hvdscale.train.runner import run

    out = comm_world.bcast(tempfile.mkdtemp(prefix="hvdscale-mwms-") if comm_world.rank == 0
                           else None)
    cfg = load_config("configs/demo.yaml", [
        "framework=tf", "strategy.name=mwms", "measure.warmup_steps=1", "measure.steps=3",
        "data.synthetic.sentences_per_rank=64"])
    record = run(cfg, out)
    if comm_world.rank == 0:
        assert record is not None and record.status == "ok"
        assert record.strategy["name"] == "mwms"
        assert record.strategy["replicas_in_sync"] == comm_world.size
        assert len(record.strategy["workers"]) == comm_world.size
        assert record.launcher_backend == "mpi"
    # Checked on every rank: MWMS is TensorFlow's own; neither torch nor Horovod is touched.
    assert _loaded("torch") == []
    assert _loaded("horovod") == []


def test_tf_config_is_not_left_behind(comm_world) -> None:
    # The session's MWMS (conftest) was made from a TF_CONFIG agreed over MPI. It is exported
    # only while MWMS reads it: later subprocesses, or a retry taking it for the user's, must
    # not inherit this job's cluster.
    from hvdscale.frameworks.tf.mwms import native

    assert "TF_CONFIG" not in os.environ
    _, conf = native(MWMSConfig(), comm_world)
    assert len(conf["cluster"]["worker"]) == comm_world.size
    assert "TF_CONFIG" not in os.environ


def test_other_mwms_settings_in_the_same_process_are_refused(comm_world) -> None:
    from hvdscale.frameworks.tf.mwms import native

    # The session's MWMS has the defaults (conftest); TensorFlow configures its collectives
    # once per process, so other settings cannot take effect here and must not pass silently.
    with pytest.raises(ConfigError, match="once per process; run these settings in a new process"):
        native(MWMSConfig(communication="ring"), comm_world)
    native(MWMSConfig(), comm_world)  # the same settings: the same strategy


def test_nccl_without_a_gpu_is_refused(comm_world) -> None:
    import tensorflow as tf

    import hvdscale.frameworks.tf.mwms as mwms

    if tf.config.get_visible_devices("GPU"):
        pytest.skip("this rank sees a GPU: NCCL is allowed here")
    saved = dict(mwms._NATIVE)
    mwms._NATIVE.clear()  # as in a fresh process, where the checks run before MWMS is made
    try:
        with pytest.raises(ConfigError, match="communication=nccl needs a GPU"):
            mwms.native(MWMSConfig(communication="nccl"), comm_world)
    finally:
        mwms._NATIVE.update(saved)


@pytest.mark.np3
def test_noise_probe_under_mwms(comm_world) -> None:
    """Issue 33: the probe reads the mirrored variables outside strategy.run and estimates.
    (MWMS is set up once per process, so the on/off comparison of the trained weights runs
    for Horovod and PS in tests/mpi_tf; here: an estimate per evaluation, replicas equal.)"""
    from hvdscale.train.runner import run
    from tests.noise_probe import TINY_LM

    out = comm_world.bcast(tempfile.mkdtemp(prefix="hvdscale-mwms-") if comm_world.rank == 0
                           else None)
    rec = run(load_config(None, [*TINY_LM, "framework=tf", "strategy.name=mwms"]), out)
    if comm_world.rank == 0:
        ns = rec.quality["noise_scale"]
        assert [p["ranks"] for p in ns["per_point"]] == [comm_world.size] * 3, ns
        assert ns["points"] == 3 and ns["probe_s"] > 0
        assert len({(f["sum"], f["l2"]) for f in rec.fingerprints}) == 1
