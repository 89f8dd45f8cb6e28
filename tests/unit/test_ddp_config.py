"""``strategy.ddp``: defaults, each key's refusal naming the key, the framework checks of the
frameworks' own strategies, the launch check (DDP needs MPI), and the rendezvous's choice of
rank 0's address (pure functions; the multi-rank part is tests/mpi_ddp)."""

from __future__ import annotations

import pytest

from hvdscale import registry
from hvdscale.config import check_launch, load_config
from hvdscale.core import rendezvous
from hvdscale.errors import ConfigError


def test_defaults_are_ddps_own() -> None:
    d = load_config(None, ["strategy.name=ddp"]).strategy.ddp
    assert d.bucket_cap_mb == 25.0 and d.comm_hook == "none" and d.idle == "join"
    assert not (d.gradient_as_bucket_view or d.static_graph or d.find_unused_parameters)
    assert {"ddp", "mwms"} <= set(registry.names())
    assert {s for s in registry.names() if registry.get(s).native} == {"ddp", "mwms"}


@pytest.mark.parametrize("override,key", [
    ("strategy.ddp.bucket_cap_mb=0", "strategy.ddp.bucket_cap_mb"),
    ("strategy.ddp.comm_hook=int8", "strategy.ddp.comm_hook"),
    ("strategy.ddp.powersgd_rank=0", "strategy.ddp.powersgd_rank"),
    ("strategy.ddp.powersgd_start_iter=1", "strategy.ddp.powersgd_start_iter"),
    ("strategy.ddp.idle=skip", "strategy.ddp.idle"),
    ("strategy.ddp.timeout_s=0", "strategy.ddp.timeout_s"),
    ("strategy.ddp.static_graph=maybe", "strategy.ddp.static_graph"),
])
def test_bad_values_name_their_key(override: str, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(None, ["strategy.name=ddp", override])


@pytest.mark.parametrize("strategy,framework,needs", [("ddp", "tf", "framework=torch"),
                                                      ("mwms", "torch", "framework=tf")])
def test_native_strategies_need_their_framework(strategy: str, framework: str,
                                                needs: str) -> None:
    with pytest.raises(ConfigError, match=f"strategy.name .*needs {needs}.*"
                                          f"framework={framework}"):
        load_config(None, [f"strategy.name={strategy}", f"framework={framework}"])


def test_ddp_needs_an_mpi_launch() -> None:
    cfg = load_config(None, ["strategy.name=ddp"])
    check_launch(cfg, 2, mpi=True)
    with pytest.raises(ConfigError, match=r"strategy.name=ddp needs an MPI launch.*--gloo"):
        check_launch(cfg, 2, mpi=False)


def test_rank0_address_is_the_one_every_host_can_route_to() -> None:
    own = [("eth0", "10.0.0.1", "255.255.255.0"), ("hvd0", "192.168.7.1", "255.255.255.0")]
    assert rendezvous._shared_address(own, [["192.168.7.2"], ["192.168.7.3"]]) == "192.168.7.1"
    assert rendezvous._shared_address(own, [["10.0.0.9", "172.16.0.2"]]) == "10.0.0.1"
    with pytest.raises(RuntimeError, match="MASTER_ADDR"):
        rendezvous._shared_address(own, [["192.168.7.2"], ["10.0.0.3"]])
