"""Cross-section checks of ``strategy.ddp.idle=join``: settings DDP's join context cannot run.

A joined rank stays inside one ``strategy.step`` call, shadowing the others' collectives, until
every rank has joined. That is sound only when a rank without a batch has no batch left in the
window: with ``measure.epochs`` and ``data.bucketing.mode=per_rank``. Anything that needs a
joined rank back before the window ends (a later batch, an evaluation) would deadlock, so the
config is refused at load time, identically on every rank, before any collective.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hvdscale.errors import ConfigError

if TYPE_CHECKING:
    from hvdscale.config.run import RunConfig

_FIX = "use strategy.ddp.idle=zero"


def check_ddp_join(cfg: RunConfig) -> None:
    """Refuse ``strategy.ddp.idle=join`` where a joined rank would be needed back.

    Raises:
        ConfigError: ``idle=join`` in epoch mode with a bucketing mode other than
            ``per_rank`` (a rank idles mid-epoch and has batches again later), or with
            ``measure.eval_every``/``eval_every_s`` (a joined rank cannot reach the evaluation).
    """
    m = cfg.measure
    if cfg.strategy.name != "ddp" or cfg.strategy.ddp.idle != "join" or m.epochs == 0:
        return  # without epochs no rank idles: the join context is never entered
    mode = cfg.data.bucketing.mode
    if mode != "per_rank":
        raise ConfigError(f"strategy.ddp.idle=join needs data.bucketing.mode=per_rank with "
                          f"measure.epochs (got {mode}: a rank idles mid-epoch and has batches "
                          f"again later, after it joined); {_FIX}")
    if m.eval_every or m.eval_every_s:
        key = "measure.eval_every" if m.eval_every else "measure.eval_every_s"
        value = m.eval_every or m.eval_every_s
        raise ConfigError(f"strategy.ddp.idle=join cannot evaluate during measure.epochs "
                          f"(got {key}={value:g}: a rank that joined waits inside its step "
                          f"until every rank finishes the epoch, so it cannot take part in an "
                          f"evaluation); {_FIX}")
