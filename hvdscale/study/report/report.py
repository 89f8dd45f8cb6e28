"""The scaling report of a results directory: report.md, report.csv and (optionally) PNG plots.

Records are grouped by experiment (hvdscale.records.experiment): records of different experiments
never share a table or a median, and a directory holding several gets one section each, saying
what differs between them. Within an experiment, framework, RNN implementation and strategy
(with its settings) are series, compared side by side (hvdscale.study.report.points groups them,
hvdscale.study.report.tables renders them, hvdscale.study.report.scaling_plot draws them).

speedup_N = words/s with N workers / words/s with 1 worker (same experiment and series);
efficiency = 100 * speedup_N / N. Workers are the ranks that compute: all ranks, except under a
dedicated parameter server, whose serve-only ranks are not counted (the table says so). Repeated
points are summarised by their median and spread, speedups and ratios paired by round, and
points measured on a busy host marked (hvdscale.study.report.noise).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hvdscale.errors import HvdscaleError
from hvdscale.records.batch import BatchRecord
from hvdscale.records.experiment import identity_id
from hvdscale.records.failed import FailedRecord
from hvdscale.records.fields import Record
from hvdscale.records.gemm import GemmRecord
from hvdscale.records.profile import ProfileRecord
from hvdscale.records.run import RunRecord
from hvdscale.records.store import load_records
from hvdscale.study.plotting import write_atomic
from hvdscale.study.quality.lr_rules import rules_section
from hvdscale.study.quality.time_to_quality import plot_quality, quality_section
from hvdscale.study.report.answer import answer
from hvdscale.study.report.breakdown import section as why_not_better
from hvdscale.study.report.points import Experiment, collect
from hvdscale.study.report.scaling_plot import plot_scaling
from hvdscale.study.report.startup import startup_section
from hvdscale.study.report.tables import failed_points, horovod_timelines, markdown, to_csv
from hvdscale.study.sweep.timing import unaccounted


def _point_id(rec: RunRecord | FailedRecord) -> tuple:
    return (rec.ranks, None if rec.config is None else identity_id(rec.config))


def open_failures(records: Sequence[Record]) -> list[FailedRecord]:
    """Failed records not measured successfully later (same identity and ranks): a sweep that
    redoes a failed point should not go on reporting the old failure."""
    last_ok = {_point_id(r): i for i, r in enumerate(records) if isinstance(r, RunRecord)}
    return [r for i, r in enumerate(records)
            if isinstance(r, FailedRecord) and last_ok.get(_point_id(r), -1) < i]


def _output_dir(results: str | Path, out: str | Path | None) -> Path:
    src = Path(results)
    out_dir = Path(out) if out else (src if src.is_dir() else src.parent)
    if out_dir.exists() and not out_dir.is_dir():
        raise HvdscaleError(f"report directory {out_dir} is an existing file, not a directory; "
                            "give --out a directory")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise HvdscaleError(f"report directory {out_dir} cannot be created: "
                            f"{e.strerror or e}") from None
    return out_dir


def run_sections(records: Sequence[Record], exps: dict[str, Experiment],
                 results: str | Path) -> list[str]:
    """The run records' sections, in the report's order (each "" when it has nothing to show).
    A new section is one more line here: a function of the records and/or the experiments."""
    tables = markdown(exps)
    # The answer opens the report, right under its title (issue 62); the tables follow as
    # they were.
    title, rest = tables.split("\n\n", 1)
    warning = ""
    if rest.startswith("**Busy host"):  # a caveat on every figure, the answer's too: first
        warning, rest = rest.split("\n\n", 1)
        warning += "\n\n"
    return [f"{title}\n\n{warning}{answer(records, exps)}{rest}", why_not_better(records),
            quality_section(records),
            rules_section(records), startup_section(records, results),
            failed_points(open_failures(records)),
            horovod_timelines(records)]


def late_note(notes: list[str]) -> str:
    """The records left out because their sweep never accounted for them (issue 50)."""
    if not notes:
        return ""
    return ("\n## Left out: records their sweep never accounted for\n\n"
            + "".join(f"- {n}\n" for n in notes) + "\n")


def files_line(out_dir: Path, plots: list[Path]) -> str:
    """The report's last line: where each of its files is (the sweep and ``hvdscale report``
    print the report, so this is what a user reads last)."""
    line = (f"Files: {out_dir / 'report.md'} (this report), {out_dir / 'report.csv'} (every "
            "point as one row, spread and load included)")
    if plots:
        line += "; plots: " + ", ".join(str(f) for f in plots)
    return line + "\n"


def write_report(results: str | Path, out: str | Path | None = None, plot: bool = False) -> str:
    """Read records under ``results``, write report.md, report.csv (and PNGs); return the md.

    Raises:
        HvdscaleError: unreadable results, a record that is not an hvdscale record, or an
            output directory that cannot be written.
    """
    loaded, late = unaccounted(load_records(results))
    # gemm, profile and batch records (``kind``) have their own sections below the runs'.
    points = (RunRecord, FailedRecord)
    others = [rec for _, rec in loaded if not isinstance(rec, points)]
    records = [rec for _, rec in loaded if isinstance(rec, points)]
    exps = collect(records)
    md = "".join(run_sections(records, exps, results)) + kind_sections(others) + late_note(late)
    out_dir = _output_dir(results, out)
    try:
        files = plot_scaling(exps, out_dir) + plot_quality(records, out_dir) if plot else []
        md += files_line(out_dir, files)
        write_atomic(out_dir / "report.md", md.encode())
        write_atomic(out_dir / "report.csv", to_csv(exps).encode())
    except OSError as e:
        raise HvdscaleError(f"report directory {out_dir} cannot be written: "
                            f"{e.strerror or e}") from None
    return md


def kind_sections(records: Sequence[Record]) -> str:
    """Markdown of the latest gemm record and of the latest profile and batch records per
    config, from the modules that wrote them."""
    from hvdscale.study.stepcost import batch as batchsize
    from hvdscale.study.stepcost import gemm_report, profile

    render = {"gemm": gemm_report.markdown, "profile": profile.markdown,
              "batch": batchsize.markdown}
    latest: dict[tuple, GemmRecord | ProfileRecord | BatchRecord] = {}
    for r in records:
        if isinstance(r, GemmRecord | ProfileRecord | BatchRecord) and r.status == "ok":
            ident = (r.kind,) if isinstance(r, GemmRecord) else (r.kind, repr(r.config))
            latest[ident] = r
    # The study tools' markdown reads the record as its file holds it.
    return "".join(render[r.kind](r) + "\n" for r in latest.values())
