"""What makes two runs "the same experiment": the one definition the whole tool uses.

A run's *identity* is its resolved config with everything that cannot change the measurement
taken out; the rank count and the launcher are never part of it (they are the axes a scaling
table spreads an experiment over). The sweep skips a point whose identity and ranks are already
recorded, the report never puts records of different identities into one row, failed points are
matched to later successes by it, and every record carries it in its ``key``.

Label-only fields (never part of the identity):

* ``name``: a label for tables; two runs that differ only in their name measure the same thing;
* ``measure.step_timeout_s``, ``measure.run_timeout_s``, ``strategy.horovod.stall_check_s``,
  ``strategy.ddp.timeout_s``, ``strategy.mwms.timeout_s``: supervision limits; they end a broken
  run but leave a healthy one's timing alone;
* ``strategy.mwms.port``: where MWMS's workers listen, not how fast;
* ``measure.noise_scale``: the gradient-noise probe runs outside training time and changes
  nothing that is trained (records from before the setting stay comparable);
* ``strategy.horovod.timeline`` and ``strategy.horovod.autotune_log``: only *whether* they are
  on counts (writing a timeline costs time), not the path written to.

Fields that cannot act in a run are dropped as well, so they never split experiments:
``strategy.horovod``/``ps``/``ddp``/``mwms`` unless the strategy is that one, a custom model's
fields (``model.task``, ``builder``, ``builder_sha256``) with a shipped model,
``data.text`` unless the source is text, ``data.synthetic`` unless it is synthetic, bucketing
details when bucketing is off, ``measure.steps`` in epoch mode, optimizer settings the chosen
optimizer does not read. ``model.builder_path`` (where a custom model's module was found) is
never part of it: ``model.builder`` and the sha256 of the module's source are, so two different
models never share an experiment and a changed model is a new one.

``precision`` is part of the identity (a bf16 run is another experiment than an fp32 one, with
its own tables), but its default ``fp32`` is dropped, as ``tf32: default`` is: the precision of
records from before the setting, which keep their identity.

An identity splits into the *experiment* (what a table set holds) and the *series* within it:
``framework``, ``model.rnn_impl`` and ``strategy`` (with its settings) are compared side by side
in one report section; any other difference is a different experiment with its own tables.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

LABEL_ONLY = ("name", "measure.step_timeout_s", "measure.run_timeout_s",
              "strategy.horovod.stall_check_s", "strategy.ddp.timeout_s",
              "strategy.mwms.port", "strategy.mwms.timeout_s", "measure.noise_scale")
ON_OFF = ("strategy.horovod.timeline", "strategy.horovod.autotune_log")
SERIES = ("framework", "model.rnn_impl", "strategy")



def _strategy_defaults() -> dict[str, dict[str, Any]]:
    """The strategy settings' defaults, from the config classes themselves (so a series label
    names only what was changed, and a new setting needs no entry here)."""
    from hvdscale.config import DDPConfig, HorovodConfig, PSConfig, to_dict
    from hvdscale.config.strategy import MWMSConfig

    horovod = to_dict(HorovodConfig())
    for key in ON_OFF:
        name = key.rsplit(".", 1)[1]
        horovod[name] = bool(horovod[name])
    return {"horovod": horovod, "ps": to_dict(PSConfig()), "ddp": to_dict(DDPConfig()),
            "mwms": to_dict(MWMSConfig())}


def _pop(d: dict[str, Any], dotted: str) -> Any:
    *parents, last = dotted.split(".")
    for p in parents:
        d = d.get(p)
        if not isinstance(d, dict):
            return None
    return d.pop(last, None)


def _set(d: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for p in parents:
        d = d.get(p)
        if not isinstance(d, dict):
            return
    if last in d:
        d[last] = value


def plain(config: Any) -> dict[str, Any]:
    """A config as ``to_dict`` writes it: a RunConfig (a typed record's ``config``) or a copy of
    a mapping (a file's JSON, a plan's)."""
    if dataclasses.is_dataclass(config):
        from hvdscale.config import to_dict

        return to_dict(config)
    return copy.deepcopy(dict(config))


def identity(config: Any) -> dict[str, Any]:
    """The measurement-relevant part of a resolved config (as ``to_dict`` writes it).

    Args:
        config: a RunConfig (a record's ``config``) or its ``to_dict``.

    Returns:
        A new dict: the config without label-only and inactive fields.
    """
    c = plain(config)
    for key in LABEL_ONLY:
        _pop(c, key)
    if c.get("tf32") == "default":  # records from before the setting measured the default
        c.pop("tf32")
    if c.get("precision") == "fp32":  # records from before the setting computed in fp32
        c.pop("precision")
    _drop_custom_fields(c.get("model"))
    horovod = (c.get("strategy") or {}).get("horovod")
    if isinstance(horovod, dict):
        for key in ON_OFF:
            name = key.rsplit(".", 1)[1]
            if name in horovod:
                horovod[name] = bool(horovod[name])
    strategy = c.get("strategy") or {}
    # Every section of strategy (one per strategy that has settings) but the one in use.
    for section in [k for k, v in strategy.items() if isinstance(v, dict)]:
        if strategy.get("name") != section:
            strategy.pop(section, None)
    ps = strategy.get("ps")
    if isinstance(ps, dict) and ps.get("sparse_embeddings") == "off":
        # The default (dense) is what records from before the setting measured: same identity.
        ps.pop("sparse_embeddings")
    data = c.get("data") or {}
    for section in ("text", "synthetic"):
        if data.get("source", "synthetic") != section:
            data.pop(section, None)
    bucketing = data.get("bucketing")
    if isinstance(bucketing, dict) and not bucketing.get("enabled"):
        data["bucketing"] = {"enabled": False}
    measure = c.get("measure") or {}
    if measure.get("epochs"):
        measure.pop("steps", None)
    optim = c.get("optim") or {}
    if optim.get("name") != "momentum":
        optim.pop("momentum", None)
    if optim.get("name") != "adam":
        optim.pop("betas", None)
        optim.pop("eps", None)
    _drop_idle_warmup(optim, data.get("scaling", "weak"))
    return c


def _drop_custom_fields(model: Any) -> None:
    """Keep a custom model's builder and source hash; drop where its module was found, and
    the custom fields of a shipped model (records from before them keep their identity)."""
    if not isinstance(model, dict):
        return
    model.pop("builder_path", None)
    if model.get("kind") != "custom":
        for name in ("task", "builder", "builder_sha256"):
            model.pop(name, None)


def _drop_idle_warmup(optim: dict[str, Any], scaling: Any) -> None:
    """Drop ``optim.warmup_*`` where the rate is ``lr`` from the first update anyway (no steps,
    or nothing to ramp from): records from before the setting keep their identity."""
    scaled = optim.get("scale_lr", "none") != "none" and scaling == "weak"
    if not optim.get("warmup_steps") or (optim.get("warmup_start_lr") is None and not scaled):
        optim.pop("warmup_steps", None)
        optim.pop("warmup_start_lr", None)
    elif optim.get("warmup_start_lr") is None:
        optim.pop("warmup_start_lr")


def series_of(config: Any) -> dict[str, Any]:
    """The series part of the identity: framework, RNN implementation, strategy settings."""
    ident = identity(config)
    return {"framework": ident.get("framework", "torch"),
            "rnn_impl": (ident.get("model") or {}).get("rnn_impl"),
            "strategy": ident.get("strategy") or {}}


def experiment_of(config: Any) -> dict[str, Any]:
    """The identity without its series fields: what one report section holds."""
    ident = identity(config)
    for key in SERIES:
        _pop(ident, key)
    return ident


def _digest(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def experiment_id(config: Any) -> str:
    """Short stable hash of :func:`experiment_of` (records of one experiment share it)."""
    return _digest(experiment_of(config))


def identity_id(config: Any) -> str:
    """Short stable hash of the whole :func:`identity` (experiment and series)."""
    return _digest(identity(config))


def strategy_label(config: Any) -> str:
    """``horovod``, ``ps``, ``ps-dedicated x2``, ``horovod (compression=fp16)``: the strategy
    and every setting that differs from its default, so different settings never share a
    label."""
    s = series_of(config)["strategy"]
    name = s.get("name", "?")
    settings = s.get(name) or {}
    defaults = _strategy_defaults().get(name, {})
    changed = {k: v for k, v in sorted(settings.items()) if defaults.get(k, object()) != v}
    label = name
    if name == "ps":
        placement = changed.pop("placement", None)
        servers = changed.pop("num_servers", None)
        label += f"-{placement}" if placement else ""
        label += f" x{servers}" if servers else ""
    if changed:
        label += " (" + ", ".join(f"{k}={_short(v)}" for k, v in changed.items()) + ")"
    return label


def _short(v: Any) -> str:
    if v is True:
        return "on"
    if v is False:
        return "off"
    return f"{v:g}" if isinstance(v, float) else str(v)


def series_label(config: Any) -> str:
    """``torch / fused / horovod``: the series a record belongs to within its experiment."""
    config = plain(config)  # once, not in each of the two identities below
    s = series_of(config)
    return f"{s['framework']} / {s['rnn_impl']} / {strategy_label(config)}"


def same_point(rec_config: Any, rec_ranks: int, config: Any,
               ranks: int) -> bool:
    """True when a record (its config and ranks) measured the experiment and series of
    ``config`` at ``ranks``."""
    return (rec_ranks == ranks and rec_config is not None
            and identity(rec_config) == identity(config))


def differences(configs: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per experiment id, the dotted experiment fields whose values are not shared by all.

    Args:
        configs: one config per experiment id.

    Returns:
        ``{experiment_id: {"data.batch_size": 8, ...}}``; empty dicts for a single experiment.
    """
    # fp32, dropped from identities (see identity), is named as such rather than "(unset)".
    flat = {eid: {"precision": "fp32", **_flatten(experiment_of(c))}
            for eid, c in configs.items()}
    keys = sorted({k for f in flat.values() for k in f})
    varying = [k for k in keys
               if len({json.dumps(f.get(k, "(unset)"), sort_keys=True) for f in flat.values()})
               > 1]
    return {eid: {k: f.get(k, "(unset)") for k in varying} for eid, f in flat.items()}


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def record_key(config: Any) -> dict[str, Any]:
    """The ``key`` of a record (runner and sweep alike): the experiment and series ids, plus
    the main fields in plain words for people reading results.jsonl."""
    config = plain(config)  # once, not in each identity below
    c = identity(config)
    model, data, measure = c.get("model", {}), c.get("data", {}), c.get("measure", {})
    return {"experiment": experiment_id(config), "identity": identity_id(config),
            "series": series_label(config),
            "model": model.get("kind"), "builder": model.get("builder"),
            "framework": c.get("framework"),
            "rnn_impl": model.get("rnn_impl"), "strategy": c.get("strategy", {}).get("name"),
            "precision": c.get("precision", "fp32"),
            "scaling": data.get("scaling"), "batch_size": data.get("batch_size"),
            "bucketing": data.get("bucketing", {}).get("enabled", False),
            "tokens_per_batch": data.get("bucketing", {}).get("tokens_per_batch", 0),
            "pad_to": data.get("pad_to"), "epochs": measure.get("epochs", 0),
            "source_kind": (data.get("synthetic") or {}).get("kind", "uniform")
            if data.get("source", "synthetic") == "synthetic" else "text",
            "until": (measure.get("until") or {}).get("metric", "none"),
            "until_target": (measure.get("until") or {}).get("target"),
            "scale_lr": c.get("optim", {}).get("scale_lr", "none"),
            "lr_warmup_steps": c.get("optim", {}).get("warmup_steps", 0),
            "name": config.get("name")}
