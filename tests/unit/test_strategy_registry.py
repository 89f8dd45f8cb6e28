"""The strategy registry (hvdscale.registry): the built-ins' table, one clear error
for an unknown name, ``register`` and plugins; and every reader of a strategy's traits reads
them from there: a strategy registered here alone (``tiny``) is accepted, refused, grouped,
ordered, fitted and built as its entry says."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hvdscale import registry
from hvdscale.config import RunConfig, check_launch, load_config
from hvdscale.errors import ConfigError, HvdscaleError
from hvdscale.strategies import make_strategy
from hvdscale.study.predict.families import family_names, overlaps
from hvdscale.study.report.decompose import sends_nothing
from hvdscale.study.report.points import Experiment
from hvdscale.study.report.tables import _series_order
from hvdscale.study.sweep.groups import alone_reason
from hvdscale.study.sweep.plan import Point, parse_strategies
from hvdscale.train.noise_scale import why_not
from tests.records_fixture import run_record

ROOT = Path(__file__).resolve().parents[2]
BUILT = ("horovod", "independent", "ps", "ddp", "mwms")


@pytest.fixture
def tiny() -> Iterator[registry.StrategySpec]:
    """A strategy unlike every built-in, registered for one test."""
    spec = registry.register(registry.StrategySpec(
        "tiny", "a unit test's strategy", lambda cfg, world, hooks: ("built", cfg.name, world),
        frameworks=("torch",), mpi="it talks MPI", sends=False, order=-1,
        families=("contention",), overlaps=True, precisions=("fp32",), rnn_impls=("loop",),
        refuses="tiny is small", alone="tiny runs alone"))
    try:
        yield spec
    finally:
        registry.unregister("tiny")


def _cfg(*sets: str) -> RunConfig:
    return load_config(None, ["framework=torch", "strategy.name=tiny", "model.rnn_impl=loop",
                              *sets])


def test_the_built_ins_in_their_order_and_an_unknown_name_names_them() -> None:
    assert registry.names() == BUILT
    with pytest.raises(HvdscaleError, match=r"^unknown strategy 'nope'; known: "
                       r"horovod, independent, ps, ddp, mwms$"):
        registry.get("nope")
    assert registry.find("nope") is None
    assert registry.native_for("torch") == "ddp" and registry.native_for("tf") == "mwms"
    assert [s for s in BUILT if not registry.get(s).sends] == ["independent"]
    assert [s for s in BUILT if registry.get(s).alone] == ["mwms"]
    assert [s for s in BUILT if registry.get(s).needs_mpi] == ["ps", "ddp", "mwms"]


def test_register_refuses_a_taken_name_and_an_unknown_framework() -> None:
    with pytest.raises(HvdscaleError, match="strategy 'ps' is registered twice"):
        registry.register(registry.StrategySpec("ps", "again", lambda *a: None))
    with pytest.raises(HvdscaleError, match=r"frameworks must be among torch, tf"):
        registry.register(registry.StrategySpec("mx", "x", lambda *a: None, frameworks=("mx",)))
    assert "mx" not in registry.names()


def test_a_plugin_that_cannot_be_imported_is_one_clear_error() -> None:
    with pytest.raises(HvdscaleError, match=r"HVDSCALE_STRATEGY_PLUGINS: cannot import "
                                            r"'no_such_plugin_module'"):
        registry.load_plugins("no_such_plugin_module")


def test_a_plugin_whose_import_raises_is_one_line_without_a_traceback(tmp_path) -> None:
    (tmp_path / "broken_plugin_61.py").write_text("x = 1\nraise RuntimeError('plugin broke')\n")
    env = {**os.environ, registry.PLUGINS_ENV: "broken_plugin_61",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    got = subprocess.run([sys.executable, "-m", "hvdscale", "run", "configs/demo.yaml"],
                         env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert got.returncode != 0
    assert "Traceback" not in got.stderr
    (line,) = got.stderr.strip().splitlines()
    assert ("HVDSCALE_STRATEGY_PLUGINS: importing 'broken_plugin_61' raised RuntimeError: "
            "plugin broke (") in line and "broken_plugin_61.py:2)" in line


def test_config_reads_the_registry(tiny: registry.StrategySpec) -> None:
    assert _cfg().strategy.name == "tiny"
    with pytest.raises(ConfigError, match=r"strategy.name must be one of horovod, independent, "
                                          r"ps, ddp, mwms, tiny, or one that a plugin module "
                                          r"named in HVDSCALE_STRATEGY_PLUGINS registers "
                                          r"\(got 'huge'\)"):
        load_config(None, ["strategy.name=huge"])
    with pytest.raises(ConfigError, match=r"tiny is a unit test's strategy and needs "
                                          r"framework=torch, not framework=tf"):
        _cfg("framework=tf")
    with pytest.raises(ConfigError, match=r"precision bf16 with strategy.name=tiny is refused: "
                                          r"tiny is small"):
        _cfg("precision=bf16")
    with pytest.raises(ConfigError, match=r"model.rnn_impl fused with strategy.name=tiny is "
                                          r"refused: tiny is small"):
        _cfg("model.rnn_impl=fused")
    check_launch(_cfg(), 2, mpi=True)
    with pytest.raises(ConfigError, match=r"strategy.name=tiny needs an MPI launch .*: "
                                          r"it talks MPI$"):
        check_launch(_cfg(), 2, mpi=False)


def test_the_sweep_report_predict_and_runner_read_the_registry(
        tiny: registry.StrategySpec) -> None:
    assert parse_strategies("tiny,ps") == ["tiny", "ps"]
    assert alone_reason(Point(0, "tiny", 2, _cfg()), per_point=False) == "tiny runs alone"
    assert family_names("tiny") == ("contention",) and overlaps("tiny")
    assert sends_nothing(run_record("strategy.name=tiny", "model.rnn_impl=loop"))
    assert not sends_nothing(run_record("strategy.name=horovod"))
    assert why_not("tiny", 2, True) == "strategy tiny trains no shared model (replicas share " \
                                        "no weights)"
    exp = Experiment("e", {}, ["n"], {f"tf / loop / {s}": [] for s in ("ps", "zz", "tiny")})
    assert _series_order(exp) == ["tf / loop / tiny", "tf / loop / ps", "tf / loop / zz"]
    assert make_strategy(_cfg().strategy, "world", None) == ("built", "tiny", "world")


def test_a_family_the_predictor_lacks_is_refused(tiny: registry.StrategySpec) -> None:
    registry.unregister("tiny")
    registry.register(registry.StrategySpec("tiny", "x", lambda *a: None, families=("magic",)))
    with pytest.raises(HvdscaleError, match="strategy 'tiny' names prediction families magic"):
        family_names("tiny")


def test_the_launches_each_strategy_runs_under_and_the_one_line_refusals() -> None:
    launches = {s: registry.get(s).launches for s in BUILT}
    assert launches == {"horovod": ("mpi", "gloo"), "independent": ("mpi", "gloo", "torchrun"),
                        "ps": ("mpi",), "ddp": ("mpi", "torchrun"), "mwms": ("mpi",)}
    for name in ("horovod", "ps", "mwms"):
        line = registry.launch_refusal(registry.get(name), "torchrun")
        assert line.startswith(f"strategy.name={name} does not run under torchrun: ")
        assert line.endswith("launch it with mpirun, srun --mpi=pmix or horovodrun "
                             "(hvdscale sweep --launcher mpirun)") and "\n" not in line
    assert registry.launch_refusal(registry.get("ddp"), "torchrun") == ""
    assert "or torchrun" in registry.launch_refusal(registry.get("ddp"), "gloo")
    with pytest.raises(ConfigError, match=r"strategy\.name=ps does not run under torchrun"):
        check_launch(load_config(None, ["strategy.name=ps"]), 2, "torchrun")


def test_a_plugin_that_says_nothing_of_torchrun_is_refused_there(
        tiny: registry.StrategySpec) -> None:
    assert tiny.launches == ("mpi",)
    assert "does not declare that it runs without MPI" in registry.launch_refusal(tiny,
                                                                                 "torchrun")


@pytest.mark.parametrize("env,kind,rank", [
    ({"OMPI_COMM_WORLD_RANK": "1"}, "mpi", 1),
    ({"HOROVOD_GLOO_RENDEZVOUS_ADDR": "x", "HOROVOD_RANK": "1"}, "gloo", 1),
    # srun + torchrun: SLURM numbers the node's agent, torchrun the rank
    ({"TORCHELASTIC_RUN_ID": "j", "RANK": "3", "SLURM_PROCID": "1"}, "torchrun", 3),
    ({"RANK": "2", "WORLD_SIZE": "4", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "torchrun", 2),
    # a user's MASTER_ADDR under mpirun is DDP's rendezvous, not a torchrun launch
    ({"RANK": "2", "WORLD_SIZE": "4", "MASTER_ADDR": "h", "MASTER_PORT": "1",
      "OMPI_COMM_WORLD_RANK": "0"}, "mpi", 0),
])
def test_the_launch_is_told_from_the_launchers_environment(env, kind, rank, monkeypatch) -> None:
    from hvdscale.core import world

    for var in (*world.RANK_ENV_VARS, *world.TORCHRUN_VARS, "TORCHELASTIC_RUN_ID",
                "HOROVOD_GLOO_RENDEZVOUS_ADDR"):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert (world.launch_kind(), world.launch_rank()) == (kind, rank)
