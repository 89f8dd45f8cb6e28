"""Which collectives can serve ranks that share a GPU (issue 31): crafted placements."""

from __future__ import annotations

import pytest

from hvdscale.core.device import CPU, Placement
from hvdscale.core.gpu_sharing import check_horovod, ddp_backend, gpu_key, shared_groups
from hvdscale.errors import ConfigError

GPU0 = Placement("cuda", 0, 1)
GPU1 = Placement("cuda", 1, 2)


def test_groups_name_only_gpus_with_several_ranks() -> None:
    keys = [gpu_key("a", GPU0), gpu_key("a", GPU1), gpu_key("a", GPU0), gpu_key("b", GPU0),
            gpu_key("a", CPU)]
    # Rank 3 is on host b: GPU 0 there is another GPU; rank 4 is on the CPU.
    assert shared_groups(keys) == [[0, 2]]


def test_one_gpu_per_rank_or_cpu_shares_nothing() -> None:
    assert shared_groups([gpu_key("a", GPU0), gpu_key("b", GPU0)]) == []
    assert shared_groups([gpu_key("a", CPU), gpu_key("a", CPU)]) == []


def test_horovod_with_nccl_on_a_shared_gpu_is_refused_naming_the_fix() -> None:
    with pytest.raises(ConfigError) as e:
        check_horovod([[0, 1]], nccl_built=True)
    msg = str(e.value)
    assert "ranks 0 and 1 share one GPU" in msg and "NCCL" in msg
    assert "one rank per GPU" in msg and "strategy.name=ddp" in msg


def test_horovod_paths_that_work() -> None:
    assert check_horovod([[0, 1]], nccl_built=False) == "host copy"
    assert check_horovod([], nccl_built=True) == "nccl"
    assert check_horovod([], nccl_built=False) == "host copy"


def test_ddp_takes_gloo_on_a_shared_gpu_and_nccl_on_its_own() -> None:
    assert ddp_backend("cuda", [[0, 1]])[0] == "gloo"
    assert ddp_backend("cuda", [])[0] == "nccl"
    assert ddp_backend("cpu", []) == ("gloo", "cpu")


def test_tf32_setting_checked_and_default_keeps_old_identities() -> None:
    from hvdscale.config import load_config, to_dict
    from hvdscale.records.experiment import experiment_id

    cfg = load_config("configs/demo.yaml")
    old = to_dict(cfg)
    old.pop("tf32")  # a record written before the setting existed
    assert experiment_id(to_dict(cfg)) == experiment_id(old)
    off = load_config("configs/demo.yaml", ["tf32=off"])
    assert experiment_id(to_dict(off)) != experiment_id(old)
    with pytest.raises(ConfigError, match="tf32"):
        load_config("configs/demo.yaml", ["tf32=maybe"])
