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

from pathlib import Path
from typing import Any

from hvdscale.errors import HvdscaleError
from hvdscale.records import schema
from hvdscale.records.experiment import identity_id
from hvdscale.records.store import load_records
from hvdscale.study.plotting import write_atomic
from hvdscale.study.quality.lr_rules import rules_section
from hvdscale.study.quality.time_to_quality import plot_quality, quality_section
from hvdscale.study.report.breakdown import section as why_not_better
from hvdscale.study.report.points import Experiment, collect
from hvdscale.study.report.scaling_plot import plot_scaling
from hvdscale.study.report.startup import startup_section
from hvdscale.study.report.tables import failed_points, horovod_timelines, markdown, to_csv
from hvdscale.study.sweep.overhead import unaccounted

# Fields every successful record must hold for the report; a record lacking one is named with
# its file and line instead of ending the report in a KeyError.
_NEEDED_OK = ("ranks", "workers", "words_per_s", "window_s", "step_time", "measure")


def check_records(records: list[tuple[str, dict]]) -> list[dict]:
    """The records, after checking each has what the report reads.

    Raises:
        HvdscaleError: ``FILE:LINE`` of the first record that is not an hvdscale run record.
    """
    out = []
    for where, rec in records:
        missing = [] if isinstance(rec.get("config"), dict) else ["config"]
        if schema.is_ok(rec):
            missing += [k for k in _NEEDED_OK if k not in rec]
        elif not isinstance(rec.get("ranks"), int):
            missing.append("ranks")
        if "status" not in rec:
            missing.insert(0, "status")
        if missing:
            raise HvdscaleError(f"{where}: not an hvdscale run record (no {', '.join(missing)}); "
                                "records are written by 'hvdscale run' and 'hvdscale sweep'")
        out.append(rec)
    return out


def _point_id(rec: dict) -> tuple:
    return (rec.get("ranks"), identity_id(schema.config(rec)))


def open_failures(records: list[dict]) -> list[dict]:
    """Failed records not measured successfully later (same identity and ranks): a sweep that
    redoes a failed point should not go on reporting the old failure."""
    last_ok = {_point_id(r): i for i, r in enumerate(records) if schema.is_ok(r)}
    return [r for i, r in enumerate(records)
            if not schema.is_ok(r) and last_ok.get(_point_id(r), -1) < i]


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


def run_sections(records: list[dict], exps: dict[str, Experiment],
                 results: str | Path) -> list[str]:
    """The run records' sections, in the report's order (each "" when it has nothing to show).
    A new section is one more line here: a function of the records and/or the experiments."""
    return [markdown(exps), why_not_better(records), quality_section(records),
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
    others = [rec for _, rec in loaded if not schema.is_run(rec)]
    records = check_records([(w, rec) for w, rec in loaded if schema.is_run(rec)])
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


def kind_sections(records: list[dict[str, Any]]) -> str:
    """Markdown of the latest gemm record and of the latest profile and batch records per
    config, from the modules that wrote them."""
    from hvdscale.study.stepcost import batch as batchsize
    from hvdscale.study.stepcost import gemm_report, profile

    render = {"gemm": gemm_report.markdown, "profile": profile.markdown,
              "batch": batchsize.markdown}
    latest: dict[tuple, dict[str, Any]] = {}
    for r in records:
        if r.get("kind") in render and schema.is_ok(r):
            k = schema.kind(r)
            ident = (k,) if k == "gemm" else (k, repr(r.get("config")))
            latest[ident] = r
    return "".join(render[schema.kind(r)](r) + "\n" for r in latest.values())
