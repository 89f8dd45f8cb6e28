"""MWMS's TF_CONFIG on a shared network (issue 29, findings 5 and 8): a fixed gRPC port that
another job on the node holds is one clear error before TensorFlow starts (real sockets), and
with several hosts every worker is addressed on the job's network, never on a bridge every
host has."""

from __future__ import annotations

import socket

import pytest

from hvdscale.core import rendezvous as rv
from hvdscale.errors import ConfigError
from hvdscale.frameworks.tf.tf_config import agree_tf_config, worker_addresses
from tests.unit.test_rendezvous import host


class _OneRank:
    rank, size, local_rank = 0, 1, 0

    def allgather(self, obj: object) -> list[object]:
        return [obj]


def test_a_port_another_job_holds_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with socket.create_server(("", 0)) as other_job:
        port = other_job.getsockname()[1]
        with pytest.raises(ConfigError, match=f"port {port} on .* cannot be bound"):
            agree_tf_config(_OneRank(), port)
    # Free again: accepted.
    assert agree_tf_config(_OneRank(), port)["cluster"]["worker"] == [f"127.0.0.1:{port}"]


def test_workers_are_addressed_on_the_job_network() -> None:
    a, b = host("10.0.1.5"), host("10.0.1.9")
    ranks = [("a", a, ()), ("a", a, ()), ("b", b, ())]
    ips = rv.job_addresses(ranks)
    assert ips == ["10.0.1.5", "10.0.1.5", "10.0.1.9"]
    assert worker_addresses(["a", "a", "b"], [1, 2, 1], ips) == [
        "10.0.1.5:1", "10.0.1.5:2", "10.0.1.9:1"]
    # Per-host subnets: the named interface; nothing named: host names as before.
    routed = [("a", a, ("eth0",)), ("b", host("10.0.2.7"), ("eth0",))]
    assert rv.job_addresses(routed) == ["10.0.1.5", "10.0.2.7"]
    assert rv.job_addresses([("a", a, ()), ("b", host("10.0.2.7"), ())]) is None
    assert rv.job_addresses([("a", a, ()), ("a", a, ())]) is None  # one host: loopback
