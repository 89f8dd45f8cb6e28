"""hvdscale: measure how data-parallel RNN training scales, and why not better."""

__version__ = "0.1.0"
