"""What every check returns: one report line, and the plan the checks judge against."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

OK, WARN, FAIL = "ok", "warn", "fail"
_RANK = {OK: 0, WARN: 1, FAIL: 2}


@dataclass(frozen=True)
class Line:
    """One line of the report."""

    check: str
    """What was checked (``torch``, ``horovod+torch``, ``cores``, ...)."""
    status: str
    """``ok``, ``warn`` or ``fail``."""
    value: str
    """What was found."""
    fix: str = ""
    """What to do about a warn or fail, in a few words."""

    def __post_init__(self) -> None:
        if self.status not in _RANK:
            raise ValueError(f"status must be ok, warn or fail (got {self.status!r})")

    def to_dict(self) -> dict[str, str]:
        """The line as JSON-ready fields."""
        return asdict(self)


def worst(lines: list[Line]) -> str:
    """The most severe status among ``lines`` (``ok`` for none)."""
    return max((ln.status for ln in lines), key=_RANK.__getitem__, default=OK)


@dataclass(frozen=True)
class Plan:
    """The job the user plans, as the checks see it."""

    np: int
    """Ranks planned (``--np``; under a launcher, the launched ranks)."""
    strategy: str | None = None
    """``--strategy``: the strategy the job will use (None: not said)."""
    out: str = "results"
    """Where the results will go (``--out``)."""
    hosts: dict[str, int] = field(default_factory=dict)
    """Planned ranks per host (host name -> ranks), in launch order."""
    layout_from: str = "this host"
    """Where ``hosts`` came from: ``launch``, ``hostfile F``, ``SLURM`` or ``this host``."""
    error: str = ""
    """Why the plan cannot run as asked (e.g. more ranks than the hostfile's slots)."""

    @property
    def most_per_host(self) -> int:
        """The most ranks any one host gets."""
        return max(self.hosts.values(), default=self.np)
