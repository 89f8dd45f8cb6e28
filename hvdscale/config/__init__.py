"""Run configuration: YAML read with pyyaml into frozen dataclasses, one module per section.

Every section is its own dataclass and each component is handed only its own section. Unknown
keys, wrong types and out-of-range values are rejected with a message that names the dotted key,
e.g. ``strategy.ps.num_servers must be >= 1 (got 0)``.
"""

from hvdscale.config.data_source import BucketConfig, DataConfig, SyntheticConfig, TextConfig
from hvdscale.config.load import apply_overrides, config_from_dict, load_config, to_dict
from hvdscale.config.model import ModelConfig, OptimConfig
from hvdscale.config.run import (
    PRECISIONS,
    MeasureConfig,
    RunConfig,
    ThreadsConfig,
    check_launch,
    tf32_in_force,
)
from hvdscale.config.strategy import (
    OVERLAP_MODES,
    DDPConfig,
    HorovodConfig,
    PSConfig,
    StrategyConfig,
)

__all__ = [
    "OVERLAP_MODES",
    "PRECISIONS",
    "BucketConfig",
    "DDPConfig",
    "DataConfig",
    "HorovodConfig",
    "MeasureConfig",
    "ModelConfig",
    "OptimConfig",
    "PSConfig",
    "RunConfig",
    "StrategyConfig",
    "SyntheticConfig",
    "TextConfig",
    "ThreadsConfig",
    "apply_overrides",
    "check_launch",
    "config_from_dict",
    "load_config",
    "tf32_in_force",
    "to_dict",
]
