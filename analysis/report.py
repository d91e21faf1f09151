"""The report of a sweep directory or of one run directory: its tables and figures, built once
from the records alone, for its two renderings: ``summary.md`` with its csv files and PNG
figures (``analysis/sweep_summary.py``) and ``report.html`` (``analysis/report_page.py``).

The runs' records are grouped by configuration with seeds as replicates
(``analysis/summary.py``) and compared by their ``Ranking``; every metric recorded for them
(``eval.jsonl``, ``heads.json`` too) is a column grouped the same way
(``analysis/report_columns.py``). An Optuna search (``hydra/sweeper=optuna``) is one run per
trial, numbered as Optuna numbers its trials, with its ``optimization_results.yaml`` and
``search.json``; it has no heatmap (values drawn from a range fill one cell per row and
column). Each figure is drawn by one function of ``analysis/plots.py``, whichever rendering
asks for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from analysis.plots import (
    Heatmap,
    draw_heatmap,
    heatmap,
    plot_curves,
    plot_head_maps,
    plot_prune_curve,
    plot_prune_curves,
    plot_search_history,
)
from analysis.records import warn
from analysis.report_columns import (
    Cell,
    Column,
    Ranking,
    column_cells,
    ranking,
    run_columns,
    run_records,
    with_heads,
)
from analysis.run_record import Status, collect_runs, has_record, read_run
from analysis.search_summary import read_search
from analysis.summary import (
    REPLICATE_KEY,
    Configuration,
    configuration_rows,
    group_runs,
    swept_keys,
)
from analysis.time_to_target import target_rows
from common.provenance import differing_runs


@dataclass
class Figure:
    """One figure: its caption, the function that draws it (PNG or SVG, as the file name it is
    given says), its file beside summary.md (None: the page's alone), and whether the page
    shows it (the page shows its heatmaps as coloured tables)."""

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
    search: dict[str, Any] | None  # optimization_results.yaml; None unless an Optuna search
    search_record: dict[str, Any] | None  # search.json, once the search has written it
    mixed: str | None  # the line naming runs on other code or library versions
    columns: list[Column]
    cells: list[list[Cell]]  # [column][configuration]
    heatmaps: list[Heatmap]  # one per judged column
    heads: list[Configuration]  # the runs (with their heads.json) by pruned_half_loss
    records: list[tuple[str, dict[str, Any]]]  # (run, evaluation record), in the order they count
    figures: list[Figure] = field(default_factory=list)


def build_report(path: Path, target_loss: float | None = None) -> Report | None:
    """The report of ``path``, a sweep directory or a run directory (None when it holds no
    run), with the time to ``target_loss`` (None: the sweep's own summary.target_loss)."""
    path = Path(path)
    if target_loss is None:
        recorded = (_multirun(path).get("summary") or {}).get("target_loss")
        target_loss = float(recorded) if isinstance(recorded, int | float) else None
    single = has_record(path)
    if single:
        runs = [{"run": path.name, **(read_run(path, "the report shows it as failed") or {})}]
    else:
        runs = collect_runs(path)
    if not runs:
        return None
    runs = with_heads(path, runs)
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
    search = None if single else search_result(path)
    records = run_records(path, runs)
    columns = run_columns(runs, ranked, target_loss, records)
    grouped = {column.key: column_cells(column, runs, keys) for column in columns}
    mapped = bool(keys) and search is None  # a search's values fill a cell per row and column
    heatmaps = [
        heatmap(grouped[column.key][0], keys, column.title, column.key)
        for column in columns
        if mapped and column.judged and any(c.mean is not None for c in grouped[column.key][1])
    ]
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
        search=search,
        search_record=read_search(path) if search is not None else None,
        mixed=differing_runs([(run["run"], run.get("provenance")) for run in runs]),
        columns=columns,
        cells=[cells for _, cells in grouped.values()],
        heatmaps=heatmaps,
        # the head analysis compares the loss with half the heads gated off
        heads=grouped.get("pruned_half_loss", ([], []))[0],
        records=records,
    )
    report.figures = _figures(report)
    return report


def search_result(sweep_dir: Path) -> dict[str, Any] | None:
    """None unless the sweep is an Optuna search (its sweeper in ``multirun.yaml``); then the
    plugin's ``optimization_results.yaml``, empty until the search has ended with a best trial."""
    sweeper = _multirun(sweep_dir).get("hydra", {}).get("sweeper") or {}
    if "optuna" not in str(sweeper.get("_target_", "")).lower():
        return None
    result = sweep_dir / "optimization_results.yaml"
    return (yaml.safe_load(result.read_text()) or {}) if result.is_file() else {}


def _multirun(sweep_dir: Path) -> dict[str, Any]:
    """The settings the sweep recorded (``multirun.yaml``; none in a run directory)."""
    config = sweep_dir / "multirun.yaml"
    return (yaml.safe_load(config.read_text(encoding="utf-8")) if config.is_file() else {}) or {}


def _figures(report: Report) -> list[Figure]:
    """The report's figures, in the order the page shows them."""
    figures = []
    # The summary's heatmap is pretraining's best validation loss (the page's tables draw
    # every judged column, a fine-tune's metric included).
    if report.keys and report.search is None and not report.ranked.fine_tunes:
        loss = heatmap(report.configs, report.keys, "best validation loss")
        figures.append(
            Figure(loss.title, partial(draw_heatmap, loss), "heatmap_val_loss.png", on_page=False)
        )
    if any(run.get("val_curve") for run in report.runs):
        curves = partial(plot_curves, report.configs)
        title = "validation loss (mean over seeds; band: min to max)"
        figures.append(Figure(title, curves, "curves_val_loss.png"))
    analysed = [run["heads"] for config in report.heads for run in config.completed]
    if report.single and analysed:
        figures.append(Figure("prune curve", partial(plot_prune_curve, analysed[0]["prune_curve"])))
    elif analysed:
        curves = partial(plot_prune_curves, report.heads)
        figures.append(Figure("prune curves", curves, "prune_curves.png"))
    if report.search is not None:
        history = report.search_record or _history_of_runs(report.runs)
        figures.append(
            Figure("search history", partial(plot_search_history, history), "optuna_history.png")
        )
    for config in report.heads:
        records = [run["heads"] for run in config.completed]
        if not records or len({(r["num_layers"], r["num_heads"]) for r in records}) > 1:
            continue
        title = f"{config.label()} (mean over {len(records)} run{'s' * (len(records) > 1)})"
        maps = partial(plot_head_maps, records, title=title)
        figures.append(Figure(f"head maps of {title}", maps))
    return figures


def _history_of_runs(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A search's history as ``search.json`` holds it, from its runs alone: a search that has
    not written its record (still running, or by an earlier tinylm)."""
    states = {Status.COMPLETED: "COMPLETE", Status.PRUNED: "PRUNED"}
    trials = [
        {
            "number": int(run["run"]),
            "state": states.get(str(run.get("status")), "FAIL"),
            "values": [run.get("best_val_loss")],
            "last_reported": None,
        }
        for run in runs
        if str(run["run"]).isdigit()
    ]
    return {"objectives": ["best_val_loss"], "directions": ["minimize"], "trials": trials}
