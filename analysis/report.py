"""The report of a sweep directory or of one run directory, built once from the records alone
for its renderings: ``summary.md`` with its csv files and figures (``analysis/sweep_summary.py``)
and the features' pages (``Feature.pages``: report.html). A feature adds its columns, sections
and figures through its ``Feature.report`` hook (``conf/features.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from analysis.plots import draw_heatmap, heatmap, plot_curves
from analysis.records import warn
from analysis.report_columns import Column, Ranking, ranking, run_columns, run_records
from analysis.run_record import collect_runs, has_record, read_run
from analysis.summary import (
    REPLICATE_KEY,
    Configuration,
    configuration_rows,
    group_runs,
    swept_keys,
)
from analysis.time_to_target import target_rows
from common.provenance import differing_runs
from conf.features import hooks


@dataclass
class Figure:
    """One figure: its caption, the function that draws it (PNG or SVG, as the file name it is
    given says), its file beside summary.md (None: the page's alone), and whether the page
    shows it (its heatmaps are coloured tables there)."""

    title: str
    draw: Callable[[Path], Path]
    file: str | None = None
    on_page: bool = True


@dataclass
class Report:
    """Everything the summary and the page show of a sweep (or of one run)."""

    root: Path
    single: bool  # a run directory's own report
    runs: list[dict[str, Any]]
    swept: list[str]  # the override keys whose values differ, the seed included
    keys: list[str]  # those that set a configuration apart: all but the seed
    ranked: Ranking
    configs: list[Configuration]  # compared by ranked.metric
    # configuration_rows of configs, with their target_rows when there is a target loss
    rows: list[dict[str, Any]]
    target_loss: float | None
    mixed: str | None  # the line naming runs on other code or library versions
    columns: list[Column]
    records: list[tuple[str, dict[str, Any]]]  # (run, evaluation record), in the order they count
    figures: list[Figure] = field(default_factory=list)
    # What features add (Feature.report): a sentence saying the configurations were sampled,
    # one run each (an Optuna search's trials: no heatmap, no call for seeds), sentences
    # closing the summary's first paragraph, summary.md sections before and after its runs,
    # files of each run the page links to, and short notes on runs by name (a reproduction).
    sampled: str | None = None
    notes: list[str] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)
    appendix: list[str] = field(default_factory=list)
    run_files: list[str] = field(default_factory=list)
    run_notes: dict[str, list[str]] = field(default_factory=dict)


def build_report(path: Path, target_loss: float | None = None) -> Report | None:
    """The report of ``path``, a sweep directory or a run directory (None when it holds no
    run), with the time to ``target_loss`` (None: the sweep's own summary.target_loss)."""
    path = Path(path)
    if target_loss is None:
        recorded = (sweep_settings(path).get("summary") or {}).get("target_loss")
        target_loss = float(recorded) if isinstance(recorded, int | float) else None
    single = has_record(path)
    if single:
        runs = [{"run": path.name, **(read_run(path, "the report shows it as failed") or {})}]
    else:
        runs = collect_runs(path)
    if not runs:
        return None
    swept = swept_keys(runs)
    keys = [k for k in swept if k != REPLICATE_KEY]
    ranked = ranking(runs)
    if target_loss is not None and ranked.fine_tunes:
        warn("summary.target_loss reads pretraining's validation curve; fine-tunes have none")
        target_loss = None
    configs = group_runs(runs, keys, ranked.metric, ranked.higher_is_better)
    rows = configuration_rows(configs, ranked.means)
    if target_loss is not None:
        target = target_rows(configs, target_loss)
        rows = [{**row, **extra} for row, extra in zip(rows, target, strict=True)]
    records = run_records(path, runs)
    report = Report(
        root=path,
        single=single,
        runs=runs,
        swept=swept,
        keys=keys,
        ranked=ranked,
        configs=configs,
        rows=rows,
        target_loss=target_loss,
        mixed=differing_runs([(run["run"], run.get("provenance")) for run in runs]),
        columns=run_columns(runs, ranked, target_loss, records),
        records=records,
    )
    for add in hooks("report"):
        add(report)
    report.figures = [*_figures(report), *report.figures]
    return report


def sweep_settings(sweep_dir: Path) -> dict[str, Any]:
    """The settings the sweep recorded (``multirun.yaml``; none in a run directory)."""
    config = sweep_dir / "multirun.yaml"
    return (yaml.safe_load(config.read_text(encoding="utf-8")) if config.is_file() else {}) or {}


def _figures(report: Report) -> list[Figure]:
    """The core's figures, shown before the features'."""
    figures = []
    # The summary's heatmap is pretraining's best validation loss (the page's tables draw
    # every judged column, a fine-tune's metric included).
    if report.keys and report.sampled is None and not report.ranked.fine_tunes:
        loss = heatmap(report.configs, report.keys, "best validation loss")
        figures.append(
            Figure(loss.title, partial(draw_heatmap, loss), "heatmap_val_loss.png", on_page=False)
        )
    # A run's own page draws its validation loss with its training curves, not as a band.
    if not report.single and any(run.get("val_curve") for run in report.runs):
        curves = partial(plot_curves, report.configs)
        title = "validation loss (mean over seeds; band: min to max)"
        figures.append(Figure(title, curves, "curves_val_loss.png"))
    return figures
