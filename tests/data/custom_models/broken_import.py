"""A builder module whose import fails (tests/unit/test_custom_model.py)."""

import hvdscale_no_such_package  # noqa: F401


def build(sizes, rnn_impl):
    raise AssertionError("never reached")
