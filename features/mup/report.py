"""μP's part of a report (``Feature.report``): the learning-rate transfer of a sweep that
varies ``model.hidden_size`` and a learning rate (its summary section ``## Learning-rate
transfer`` and ``transfer.png``), and the coordinate check of each run directory that holds a
``coordcheck.json`` (``mode=coordcheck``: its figure, its verdicts as notes on the run)."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

from analysis.records import markdown_table, warn
from analysis.report import Figure, Report
from analysis.report_columns import run_dirs
from features.mup.plots import plot_coord_check, plot_transfer
from features.mup.transfer import WIDTH_KEY, Transfer, table_rows, transfer_of, verdict
from features.mup.verdict import judge, sentence

COORD_FILE = "coordcheck.json"  # mode=coordcheck's, in its run directory
COORD_FILES = (COORD_FILE, "coordcheck.md", "coordcheck.png")
TRANSFER_FIGURE = "transfer.png"
TABLE_COLUMNS = ("width", "best lr", "loss", "seeds", "within spread", "failed")


def add_mup(report: Report) -> None:
    """The transfer of a transfer sweep and the runs' coordinate checks, where there are."""
    add_transfer(report)
    add_coord_checks(report)


def add_transfer(report: Report) -> None:
    """The ``## Learning-rate transfer`` section and figure of a sweep over widths and a
    learning rate; nothing for any other report."""
    if report.single or report.ranked.fine_tunes:
        return
    transfer = transfer_of(report.configs, report.keys)
    if transfer is None:
        return
    report.sections.append(transfer_section(transfer))
    title = f"learning-rate transfer: loss against {transfer.lr_key}, a curve per width"
    report.figures.append(Figure(title, partial(plot_transfer, transfer), TRANSFER_FIGURE))


def transfer_section(transfer: Transfer) -> str:
    """The section: how it is judged, then per panel its sentence and its table."""
    text = (
        "## Learning-rate transfer\n\n"
        f"The best validation loss against `{transfer.lr_key}`, one curve per "
        f"`{WIDTH_KEY}` (`{TRANSFER_FIGURE}`): the mean over seeds, ± the sample standard "
        "deviation (the seeds' spread). Two learning rates of one width differ when their "
        "means differ by more than the larger of their spreads; `within spread` is the run "
        "of grid steps around the best that do not. The optimum moved by the grid steps "
        "between the widths' `within spread` ranges: a move smaller than the spread is no "
        "move. μP's learning rate transfers when the optimum stays within one grid step.\n"
    )
    for panel in transfer.panels:
        heading = f"\n### {panel.label}\n" if panel.label else ""
        text += f"{heading}\n{verdict(panel, transfer.lr_key)}\n\n" + markdown_table(
            TABLE_COLUMNS, table_rows(panel)
        )
    return text


def add_coord_checks(report: Report) -> None:
    """Each run's coordinate check: its figure, and its verdicts as notes on the run."""
    found = False
    for name, run_dir in run_dirs(report.root, report.runs).items():
        data = read_coord_check(run_dir)
        if data is None:
            continue
        found = True
        widths = data["widths"]
        report.run_notes.setdefault(name, []).extend(
            f"coordinate check, {sentence(j, widths).rstrip('.')}" for j in judge(data)
        )
        title = "coordinate check" if report.single else f"coordinate check of run {name}"
        report.figures.append(Figure(title, partial(plot_coord_check, data, title=title)))
    if found:
        report.run_files.extend(COORD_FILES)


def read_coord_check(run_dir: Path) -> dict[str, Any] | None:
    """``coordcheck.json`` of ``run_dir``; None without one, or (with a warning) when it is
    not one."""
    path = run_dir / COORD_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        warn(f"{path} is not a mode=coordcheck record ({err}); the report leaves it out")
        return None
    keys = ("widths", "steps", "layers", "results")
    if not isinstance(data, dict) or any(k not in data for k in keys):
        warn(f"{path} lacks the coordinate check's {', '.join(keys)}; the report leaves it out")
        return None
    return data
