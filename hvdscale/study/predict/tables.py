"""The public scaling tables shipped as data (``tables/*.csv``, copied from the seed notes, each
with its source and command in a header), read as measured points."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hvdscale.errors import HvdscaleError

TABLES_DIR = Path(__file__).with_name("tables")
STEPS = 20
"""The tables time 20 batches (after 10 warm-up batches)."""


@dataclass(frozen=True)
class Table:
    """One table: its name, strategy (``independent``, ``ps``, ``nccl``), RNN, source and
    per-GPU-count step time (s per batch) and words/s."""

    name: str
    strategy: str
    rnn: str
    source: str
    gpus: list[int]
    step_s: list[float]
    words_per_s: list[float]

    def words_per_rank_step(self, n: int) -> float:
        """Words one GPU handles per step at ``n`` GPUs."""
        i = self.gpus.index(n)
        return self.words_per_s[i] * self.step_s[i] / n


def read_table(path: Path) -> Table:
    """Parse one table file.

    Raises:
        HvdscaleError: a file without the header keys or with a malformed row.
    """
    meta: dict[str, str] = {}
    gpus, steps, wps = [], [], []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("#"):
            key, _, val = line[1:].partition(":")
            if val and key.strip() in ("table", "source", "strategy", "rnn"):
                meta[key.strip()] = val.strip()
            continue
        if not line.strip() or line.startswith("gpus"):
            continue
        try:
            g, _, t, w, _ = line.split(",")
            gpus.append(int(g))
            steps.append(float(t) / STEPS)
            wps.append(float(w))
        except ValueError:
            raise HvdscaleError(f"{path}:{i}: malformed row {line!r}") from None
    if not {"table", "source", "strategy"} <= set(meta) or not gpus:
        raise HvdscaleError(f"{path}: not a scaling table (needs '# table:', '# source:', "
                            "'# strategy:' and rows gpus,batch_size,time,words_per_s,speedup)")
    missing = sorted(set(range(1, max(gpus) + 1)) - set(gpus))
    if missing or len(set(gpus)) != len(gpus):
        raise HvdscaleError(f"{path}: the table must hold each GPU count from 1 to {max(gpus)} "
                            f"once (missing: {', '.join(map(str, missing)) or 'none'}; "
                            f"rows: {', '.join(map(str, gpus))})")
    return Table(meta["table"], meta["strategy"], meta.get("rnn", ""), meta["source"], gpus,
                 steps, wps)


def load_tables(directory: Path = TABLES_DIR) -> list[Table]:
    """Every table under ``directory``, by name."""
    tables = [read_table(p) for p in sorted(directory.glob("*.csv"))]
    if not tables:
        raise HvdscaleError(f"{directory}: no scaling tables (*.csv)")
    return tables
