"""Hostfiles in the ``HOST slots=N`` format that both horovodrun and OpenMPI read.

The tool validates a hostfile before anything launches, so a typo costs one clear line naming
the file and the line instead of a launcher's traceback minutes into a sweep. The accepted
format is the common subset of the two readers:

* one host per line: ``HOST slots=N`` with N >= 1 (HOST: letters, digits, ``_ . -``);
* blank lines and ``#`` comments (OpenMPI accepts them; horovodrun's reader does not, which is
  why :func:`write_hostfile` writes a clean copy for the launchers);
* every host at most once (OpenMPI would add the slots up, horovodrun would list the host
  twice: two different meanings, so neither is accepted).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from hvdscale.errors import HvdscaleError

# horovodrun's own host pattern (horovod.runner.common.util.hosts), so a name accepted here is
# accepted there.
_HOST = r"[\w.-]+"
_LINE = re.compile(rf"^(?P<host>{_HOST})\s+slots\s*=\s*(?P<slots>[0-9]+)$")
_BARE = re.compile(rf"^(?P<host>{_HOST})$")


@dataclass(frozen=True)
class Host:
    """One hostfile entry."""

    name: str
    slots: int
    line: int


@dataclass(frozen=True)
class Hostfile:
    """A validated hostfile: hosts in file order."""

    path: Path
    hosts: tuple[Host, ...]

    @property
    def slots(self) -> int:
        """Total slots over all hosts: the most ranks this hostfile can hold."""
        return sum(h.slots for h in self.hosts)

    def describe(self) -> str:
        """``a slots=2, b slots=2`` for messages."""
        return ", ".join(f"{h.name} slots={h.slots}" for h in self.hosts)

    def check_ranks(self, np: int) -> None:
        """Raise unless ``np`` ranks fit in the slots.

        Raises:
            HvdscaleError: more ranks than slots (launchers would refuse or oversubscribe).
        """
        if np > self.slots:
            raise HvdscaleError(
                f"hostfile {self.path} holds {self.slots} slot{'s' * (self.slots != 1)} "
                f"({self.describe()}); {np} ranks do not fit: raise slots= or lower --np")


def parse_hostfile(path: str | Path) -> Hostfile:
    """Read and validate a hostfile.

    Args:
        path: the hostfile.

    Returns:
        The hosts with their slots.

    Raises:
        HvdscaleError: missing or unreadable file, a malformed line, zero slots, a host listed
            twice, or no host at all; the message names the file and the line.
    """
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise HvdscaleError(f"hostfile not found: {p}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise HvdscaleError(f"hostfile {p} cannot be read: {e}") from None
    hosts: list[Host] = []
    seen: dict[str, int] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = _LINE.match(line)
        if m is None:
            hint = ""
            if _BARE.match(line):
                hint = f" (no slots: write '{line} slots=N')"
            elif "slots" in line:
                hint = " (slots must be a whole number, written slots=N)"
            raise HvdscaleError(f"{p}:{n}: malformed hostfile line {raw.strip()!r}{hint}; "
                                "expected 'HOST slots=N', e.g. 'node1 slots=4'")
        host, slots = m["host"], int(m["slots"])
        if slots == 0:
            raise HvdscaleError(f"{p}:{n}: host {host} has slots=0; every host needs at least "
                                "one slot (remove the line to leave the host out)")
        if host in seen:
            raise HvdscaleError(f"{p}:{n}: host {host} is listed twice (first on line "
                                f"{seen[host]}); give each host one line with its total slots")
        seen[host] = n
        hosts.append(Host(host, slots, n))
    if not hosts:
        raise HvdscaleError(f"hostfile {p} lists no hosts; expected lines 'HOST slots=N'")
    return Hostfile(p, tuple(hosts))


def write_hostfile(hosts: Hostfile, dest: str | Path) -> Path:
    """Write ``hosts`` as bare ``HOST slots=N`` lines (no comments, no blanks) to ``dest``.

    horovodrun's reader splits every line on whitespace and ``=`` and fails on comments and
    blank lines, so the launchers get this clean copy of a validated file.
    """
    d = Path(dest)
    d.parent.mkdir(parents=True, exist_ok=True)
    d.write_text("".join(f"{h.name} slots={h.slots}\n" for h in hosts.hosts))
    return d
