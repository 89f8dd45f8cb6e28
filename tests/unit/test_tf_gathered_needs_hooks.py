"""TensorFlow's after-backward allreduce densifies every gradient, so Horovod's gathered
embeddings with it are refused (one ConfigError naming both keys) instead of running dense
under a record that says gathered."""

from __future__ import annotations

import pytest

from hvdscale.config import HorovodConfig
from hvdscale.errors import ConfigError


def test_tf_gathered_with_after_backward_is_a_config_error() -> None:
    from hvdscale.frameworks.tf.horovod import HorovodTF

    cfg = HorovodConfig(embedding_grads="gathered", overlap="after-backward")
    with pytest.raises(ConfigError, match=r"embedding_grads=gathered.*overlap=hooks"):
        HorovodTF(cfg)
