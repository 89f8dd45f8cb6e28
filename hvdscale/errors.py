"""Error types that hvdscale reports to the user as one clear line."""


class HvdscaleError(Exception):
    """Bad input or a precondition the user can fix (config, corpus, hostfile, launcher).

    Raised identically on every rank when the input is shared, so the fail-fast handler prints
    it once (from the lowest failing rank) instead of N interleaved tracebacks.
    """


class ConfigError(HvdscaleError):
    """A config file or ``--set`` override is malformed, has an unknown key, or is out of range."""


class RecordError(HvdscaleError):
    """A record that does not hold what its kind declares (``hvdscale.records``): the message
    names the file, the line and the field."""
