"""The reproductions' part of a report (``Feature.report``), read from each run's
``reproductions.jsonl``: a note on each re-run run (its latest re-run's verdict), the
summary's ``## Reproductions`` section and a link to the file."""

from __future__ import annotations

from typing import Any

from analysis.records import markdown_table, read_records
from analysis.report import Report
from analysis.report_columns import run_dirs
from features.reproduce.command import HISTORY_FILE

COLUMNS = ("run", "reproduced_at", "verdict", "identical", "within tolerance", "different")


def add_reproductions(report: Report) -> None:
    """The runs' latest reproductions in ``report``, when any run has one."""
    latest: dict[str, dict[str, Any]] = {}
    for name, run_dir in run_dirs(report.root, report.runs).items():
        entries = [record for _, record in read_records(run_dir / HISTORY_FILE) if record]
        if entries:
            latest[name] = entries[-1]
    if not latest:
        return
    for name, entry in latest.items():
        report.run_notes.setdefault(name, []).append(reproduced_note(entry))
    rows = [
        {"run": name, **entry, "moved": ", ".join(entry.get("moved") or [])}
        for name, entry in latest.items()
    ]
    section = "## Reproductions\n\nEach run's latest re-run (`mode=reproduce`).\n\n"
    report.appendix.append(section + markdown_table((*COLUMNS, "moved", "rerun"), rows))
    report.run_files.append(HISTORY_FILE)


def reproduced_note(entry: dict[str, Any]) -> str:
    """One line: when the run was re-run, and with what result."""
    when = str(entry.get("reproduced_at", ""))[:10]
    moved = entry.get("moved") or []
    if entry.get("failed"):
        return f"re-run {when}: failed"
    if moved:
        return f"re-run {when}: {len(moved)} numbers moved ({', '.join(moved[:3])})"
    return f"reproduced {when}: {entry.get('verdict')}"
