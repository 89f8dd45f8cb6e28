"""``strategy.mwms``: its settings, the checks that refuse what MWMS cannot run, and TF_CONFIG
built from the launcher's ranks (hvdscale/frameworks/tf/tf_config.py)."""

from __future__ import annotations

import json
import os

import pytest

from hvdscale.config import check_launch, load_config
from hvdscale.config.strategy import MWMSConfig
from hvdscale.errors import ConfigError
from hvdscale.frameworks.tf.tf_config import (
    agree_tf_config,
    build_tf_config,
    check_user_tf_config,
    exported,
    free_port,
    worker_addresses,
)


@pytest.fixture(autouse=True)
def _no_tf_config_leak(monkeypatch: pytest.MonkeyPatch) -> None:
    """The builder exports TF_CONFIG; keep it from leaking into later tests' subprocesses."""
    monkeypatch.setenv("TF_CONFIG", "")
    monkeypatch.delenv("TF_CONFIG")


def test_defaults_and_overrides() -> None:
    cfg = load_config(None, ["framework=tf", "strategy.name=mwms",
                             "strategy.mwms.communication=ring", "strategy.mwms.port=23456",
                             "strategy.mwms.bytes_per_pack_mb=4", "strategy.mwms.timeout_s=30"])
    m = cfg.strategy.mwms
    assert (m.communication, m.port, m.bytes_per_pack_mb, m.timeout_s) == ("ring", 23456, 4, 30)
    assert MWMSConfig().communication == "auto" and MWMSConfig().port == 0


@pytest.mark.parametrize("key,value,msg", [
    ("communication", "gloo", "strategy.mwms.communication must be one of auto, ring, nccl"),
    ("port", -1, "strategy.mwms.port must be in [0, 65535]"),
    ("port", 70000, "strategy.mwms.port must be in [0, 65535]"),
    ("bytes_per_pack_mb", -1.0, "strategy.mwms.bytes_per_pack_mb must be in [0, 8192] MiB"),
    ("timeout_s", -2.0, "strategy.mwms.timeout_s must be >= 0"),
])
def test_bad_values_name_the_key(key: str, value: object, msg: str) -> None:
    with pytest.raises(ConfigError) as e:
        MWMSConfig(**{key: value})
    assert str(e.value).startswith(msg), str(e.value)


def test_mwms_needs_tensorflow_and_mpi() -> None:
    with pytest.raises(ConfigError, match="mwms is TensorFlow's MultiWorkerMirroredStrategy"):
        load_config(None, ["framework=torch", "strategy.name=mwms"])
    cfg = load_config(None, ["framework=tf", "strategy.name=mwms"])
    with pytest.raises(ConfigError, match=r"strategy\.name=mwms needs an MPI launch"):
        check_launch(cfg, 2, mpi=False)
    check_launch(cfg, 2, mpi=True)


def test_tf_config_one_worker_per_rank() -> None:
    one_host = worker_addresses(["a", "a", "a"], [1001, 1002, 1003])
    assert one_host == ["127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1003"]
    two_hosts = worker_addresses(["n1", "n1", "n2"], [1001, 1002, 1001])
    assert two_hosts == ["n1:1001", "n1:1002", "n2:1001"]
    conf = build_tf_config(two_hosts, 2)
    assert conf == {"cluster": {"worker": two_hosts}, "task": {"type": "worker", "index": 2}}


def test_user_tf_config_must_describe_this_job() -> None:
    good = json.dumps(build_tf_config(["h:1", "h:2"], 1))
    assert check_user_tf_config(good, 1, 2)["task"]["index"] == 1
    with pytest.raises(ConfigError, match=r"lists 2 workers and task .* this launch has 3 ranks"):
        check_user_tf_config(good, 1, 3)
    with pytest.raises(ConfigError, match="lists 2 workers"):
        check_user_tf_config(good, 0, 2)  # rank 0 claiming worker 1
    with pytest.raises(ConfigError, match="TF_CONFIG is not a cluster"):
        check_user_tf_config("{not json", 0, 2)


class _OneRank:
    """A one-rank world (``agree_tf_config`` needs rank, size, local_rank and allgather)."""

    rank, size, local_rank = 0, 1, 0

    def allgather(self, obj: object) -> list[object]:
        return [obj]


def test_agreed_ports_are_exported_only_while_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TF_CONFIG", raising=False)
    conf = agree_tf_config(_OneRank(), 0)
    (addr,) = conf["cluster"]["worker"]
    assert addr.startswith("127.0.0.1:") and int(addr.split(":")[1]) > 0
    assert "TF_CONFIG" not in os.environ
    with exported(conf):
        assert json.loads(os.environ["TF_CONFIG"]) == conf
    assert "TF_CONFIG" not in os.environ  # later subprocesses and retries see no stale cluster
    monkeypatch.setenv("TF_CONFIG", "")  # an empty value is unset, and is left as it was
    with exported(conf):
        assert json.loads(os.environ["TF_CONFIG"]) == conf
    assert os.environ["TF_CONFIG"] == ""
    monkeypatch.delenv("TF_CONFIG")
    # A base port N > 0 is taken as it is (local rank r gets N + r) once it is seen free. The
    # port is asked of the kernel: a fixed one in the ephemeral range (32768-60999 here) can be
    # held by any outgoing connection at that moment (issue 49: 41000 was, one run in three).
    base = free_port()
    assert agree_tf_config(_OneRank(), base)["cluster"]["worker"] == [f"127.0.0.1:{base}"]
    # A TF_CONFIG the user exported wins.
    user = build_tf_config(["somehost:5555"], 0)
    monkeypatch.setenv("TF_CONFIG", json.dumps(user))
    assert agree_tf_config(_OneRank(), 0) == user
