"""Device resolution and the staged flat-buffer path of the PyTorch adapter, on CPU."""

from __future__ import annotations

import numpy as np
import pytest

from hvdscale.config import load_config
from hvdscale.core.device import Placement, resolve_device
from hvdscale.errors import ConfigError, HvdscaleError


def test_auto_without_gpu_is_cpu() -> None:
    p = resolve_device("auto", 0, local_rank=1, local_size=2)
    assert p.kind == "cpu" and p.name == "cpu" and p.index is None and not p.stage


def test_cuda_without_gpu_names_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(HvdscaleError, match=r"device=cuda but this process sees no GPU; "
                                            r"CUDA_VISIBLE_DEVICES=''"):
        resolve_device("cuda", 0, 0, 1)


@pytest.mark.parametrize("requested", ["auto", "cuda"])
def test_gpu_per_local_rank_and_sharing(requested: str, capsys: pytest.CaptureFixture) -> None:
    # 4 ranks on a host with 2 GPUs: local ranks 0,2 on GPU 0 and 1,3 on GPU 1, 2 per GPU.
    got = [resolve_device(requested, 2, lr, 4) for lr in range(4)]
    assert [p.index for p in got] == [0, 1, 0, 1]
    assert all(p.kind == "cuda" and p.shared_by == 2 and p.stage for p in got)
    assert got[3].name == "cuda:1"
    assert capsys.readouterr().err.count("hvdscale: warning") == 2  # one warning per shared GPU
    one = resolve_device(requested, 4, 1, 2)
    assert one.index == 1 and one.shared_by == 1


def test_cpu_even_with_gpus() -> None:
    assert resolve_device("cpu", 8, 0, 1).kind == "cpu"


def test_device_key_is_validated() -> None:
    assert load_config(None, ["device=cpu"]).device == "cpu"
    assert load_config(None, []).device == "auto"
    with pytest.raises(ConfigError, match="device must be one of auto, cpu, cuda"):
        load_config(None, ["device=gpu"])


def _adapter(stage: bool):
    from hvdscale.frameworks.torch import TorchAdapter

    cfg = load_config(None, ["model.embed_dim=8", "model.hidden_size=8", "model.src_vocab=20",
                             "model.tgt_vocab=20"])
    return cfg, TorchAdapter(cfg.model, cfg.optim, 20, 20, Placement("cpu", stage=stage))


def test_staged_buffers_are_host_copies_that_round_trip() -> None:
    _, a = _adapter(stage=True)
    buf = a.params_buffer()
    assert not np.shares_memory(buf, a.flat_params.numpy())
    assert a.params_buffer() is not buf or np.shares_memory(a.params_buffer(), buf)
    buf[:] = 0.25
    assert float(a.flat_params.sum()) != pytest.approx(0.25 * buf.size)  # not yet applied
    a.params_changed()
    assert np.all(a.flat_params.numpy() == 0.25)
    a.flat_grads.fill_(2.0)
    assert np.all(a.grads_buffer() == 2.0)
    stats = a.device_stats()
    assert stats["stage"] and stats["copy_s"] > 0 and stats["peak_gpu_mem_mb"] is None


def test_unstaged_buffers_are_the_model_memory() -> None:
    _, a = _adapter(stage=False)
    assert np.shares_memory(a.params_buffer(), a.flat_params.numpy())
    assert np.shares_memory(a.grads_buffer(), a.flat_grads.numpy())
    a.synchronize()  # a no-op on CPU, but part of the protocol
    assert a.device_stats()["copy_s"] == 0.0
