"""``strategy.ddp.idle=join`` refuses the settings its join context would deadlock on (a rank
idle mid-epoch, an evaluation during the epochs), through the real CLI: one line naming the
keys and the fix, a non-zero exit, no traceback (hvdscale/config/run.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hvdscale.config import load_config
from hvdscale.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
EPOCHS = ["strategy.name=ddp", "measure.epochs=1", "data.bucketing.enabled=true"]


@pytest.mark.parametrize("extra,message", [
    (["data.bucketing.mode=aligned"],
     "strategy.ddp.idle=join needs data.bucketing.mode=per_rank with measure.epochs "
     "(got aligned"),
    (["data.bucketing.mode=global"],
     "strategy.ddp.idle=join needs data.bucketing.mode=per_rank with measure.epochs "
     "(got global"),
    (["measure.eval_every=5"],
     "strategy.ddp.idle=join cannot evaluate during measure.epochs (got measure.eval_every=5"),
    (["measure.eval_every_s=30"],
     "strategy.ddp.idle=join cannot evaluate during measure.epochs (got "
     "measure.eval_every_s=30"),
], ids=["aligned", "global", "eval_every", "eval_every_s"])
def test_join_refusals_name_the_keys_and_the_fix(extra: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(None, [*EPOCHS, *extra])
    assert message in str(e.value) and str(e.value).endswith("use strategy.ddp.idle=zero")


def test_the_cli_refuses_with_one_line() -> None:
    sets = [a for s in [*EPOCHS, "data.bucketing.mode=aligned"] for a in ("--set", s)]
    proc = subprocess.run([sys.executable, "-m", "hvdscale", "run", "configs/demo.yaml", *sets],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "strategy.ddp.idle=join needs data.bucketing.mode=per_rank" in lines[0]
    assert lines[0].endswith("use strategy.ddp.idle=zero")


@pytest.mark.parametrize("extra", [
    [],  # per_rank: a rank out of batches has none left in the window
    ["data.bucketing.mode=aligned", "strategy.ddp.idle=zero"],
    ["measure.eval_every=5", "strategy.ddp.idle=zero"],
    ["measure.epochs=0", "data.bucketing.mode=aligned", "measure.eval_every=5"],
    ["strategy.name=horovod", "data.bucketing.mode=aligned"],
])
def test_what_join_can_run_is_accepted(extra: list[str]) -> None:
    load_config(None, [*EPOCHS, *extra])
