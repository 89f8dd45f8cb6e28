"""The public scaling tables shipped as data (``tables/*.csv``, copied from the seed notes, each
with its source and command in a header), or a user's in the same format, read as measured
points. A table may hold any distinct GPU counts that include 1 (published tables are often at
powers of two, or at 1, 4, 8, 16)."""

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
    per-GPU-count step time (s per batch) and words/s, in increasing GPU count."""

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


def _check_counts(path: Path, gpus: list[int]) -> None:
    """Refuse GPU counts a back-test cannot use: any set of distinct positive counts will do
    (1, 2, 4, 8, 16 or 1, 4, 8, 16 as tables are published), but one of them must be 1.

    Raises:
        HvdscaleError: a count below 1, a count given twice, or no 1-GPU row.
    """
    rows = ", ".join(map(str, gpus))
    bad = sorted({g for g in gpus if g < 1})
    if bad:
        raise HvdscaleError(f"{path}: GPU counts must be positive (got {', '.join(map(str, bad))}"
                            f"; rows: {rows})")
    twice = sorted({g for g in gpus if gpus.count(g) > 1})
    if twice:
        raise HvdscaleError(f"{path}: each GPU count needs exactly one row; "
                            f"{', '.join(map(str, twice))} appear(s) more than once (rows: {rows})")
    # Words/s at n is only a speedup against the 1-GPU run, and every fit is anchored on it.
    if 1 not in gpus:
        raise HvdscaleError(f"{path}: no 1-GPU row (rows: {rows}); the back-test is anchored "
                            "on the 1-GPU run, so a table must include n = 1")


def read_table(path: Path) -> Table:
    """Parse one table file.

    Raises:
        HvdscaleError: a file without the header keys, with a malformed row, or with GPU
            counts ``_check_counts`` refuses.
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
    _check_counts(path, gpus)
    # Published tables need not list their rows in order; everything downstream reads the
    # last row as the largest n.
    order = sorted(range(len(gpus)), key=gpus.__getitem__)
    gpus, steps, wps = ([v[i] for i in order] for v in (gpus, steps, wps))
    return Table(meta["table"], meta["strategy"], meta.get("rnn", ""), meta["source"], gpus,
                 steps, wps)


def load_tables(directory: Path = TABLES_DIR) -> list[Table]:
    """Every table under ``directory``, by name."""
    tables = [read_table(p) for p in sorted(directory.glob("*.csv"))]
    if not tables:
        raise HvdscaleError(f"{directory}: no scaling tables (*.csv)")
    return tables
