"""``report.html``: every number recorded for a sweep (or one run) on one page that a browser
opens from disk, with its figures and what produced it.

The page holds a header (what was swept, the runs by status, the compute spent, the
provenance: ``common/provenance.py``), one table with a row per configuration and a column
per metric (``analysis/report_columns.py``: each cell the mean ± std over seeds, the best
marked, the 2 SE and Holm verdicts against it; sortable by any column), the figures
(``analysis/report_figures.py``), the failed runs with their errors and every run's settings
with links to its files. A run directory's page is the same for its one run, with its
records and its closing sample. The page is a Jinja2 template with autoescaping, so every
string that comes from a run (errors, labels, file names, swept values) is shown as text;
its images are data URIs and its only script sorts the table and picks a heatmap.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2
import yaml

from analysis.report_columns import (
    Cell,
    column_cells,
    heads_records,
    run_columns,
    run_records,
)
from analysis.report_figures import (
    Figure,
    head_maps,
    heatmaps,
    loss_heatmap,
    prune_curve,
    prune_curves,
    search_history,
    validation_curves,
)
from analysis.run_record import Status, collect_runs, has_record, read_run, record_path
from analysis.summary import REPLICATE_KEY, Configuration, group_runs, swept_keys
from analysis.sweep_summary import search_result
from common.files import write_text_atomically
from common.provenance import code_label, differing_runs

REPORT_FILE = "report.html"
TEMPLATES = Path(__file__).parent / "templates"
STATUSES = (Status.COMPLETED, Status.FAILED, Status.PRUNED)  # always counted, even at zero
COMPUTE = ("steps", "tokens", "flops", "seconds")


def write_report(path: Path, target_loss: float | None = None) -> Path | None:
    """``report.html`` in ``path``, a sweep directory or a run directory (None when it holds
    no run), with the time to ``target_loss`` (None: the sweep's own summary.target_loss)."""
    path = Path(path)
    single = has_record(path)
    if single:
        runs = [{"run": path.name, **(read_run(path, "the report shows it as failed") or {})}]
    else:
        runs = collect_runs(path)
    if not runs:
        return None
    if target_loss is None:
        target_loss = _sweep_target_loss(path)
    page = _template().render(**page_context(path, runs, single, target_loss))
    return write_text_atomically(path / REPORT_FILE, page)


def page_context(
    root: Path, runs: Sequence[dict[str, Any]], single: bool, target_loss: float | None
) -> dict[str, Any]:
    """What the template shows (see the module docstring)."""
    keys = [k for k in swept_keys(runs) if k != REPLICATE_KEY]
    columns = run_columns(root, runs, target_loss)
    cells = [column_cells(column, runs, keys)[1] for column in columns]
    configs = group_runs(runs, keys)
    heads = heads_records(root, runs)
    search = None if single else search_result(root)
    figures: list[Figure] = []
    if keys and search is None and not any(r.get("mode") == "finetune" for r in runs):
        figures.append(loss_heatmap(configs, keys))
    curves = validation_curves(configs)
    if curves:
        figures.append(curves)
    if single and heads:
        figures.append(prune_curve(next(iter(heads.values()))))
    else:
        figures += [f for f in [prune_curves(runs, heads, keys)] if f]
    if search is not None:
        figures.append(search_history(runs))
    return {
        "title": f"{'Run' if single else 'Sweep'} {root}",
        "single": single,
        "swept": {k: sorted({str(r.get("overrides", {}).get(k)) for r in runs}) for k in keys},
        "statuses": _statuses(runs),
        "compute": _compute(runs),
        "provenance": _provenance(runs),
        "mixed": differing_runs([(r["run"], r.get("provenance")) for r in runs]),
        "keys": keys,
        "columns": columns,
        "rows": _rows(configs, cells),
        "heatmaps": [] if search is not None or not keys else heatmaps(columns, runs, keys),
        "figures": figures,
        "head_maps": head_maps(configs, heads),
        "failed": [r for r in runs if r.get("status") == Status.FAILED],
        "runs": [_run_entry(r, single) for r in runs],
        "records": run_records(root, runs) if single else {},
        "sample": runs[0].get("sample") if single else None,
        "target_loss": target_loss,
    }


@functools.cache
def _template() -> jinja2.Template:
    """The page's template, compiled once a process (every eval or finetune record rewrites
    the page)."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,  # every string from a run is text, never markup
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["number"] = number
    return environment.get_template("report.html.j2")


def number(value: float | None) -> str:
    """A cell's number: 4 decimals below 1000, else 4 significant digits; empty for None."""
    if value is None:
        return ""
    return f"{value:.4f}" if abs(value) < 1000 else f"{value:.4g}"


def _rows(configs: Sequence[Configuration], cells: Sequence[Sequence[Cell]]) -> list[dict]:
    """One row per configuration: its label, values, runs, and its cell in each column."""
    return [
        {
            "values": config.values,
            "label": config.label(),
            "n": config.n,
            "failed": config.failed,
            "runs": [r["run"] for r in config.runs],
            "cells": [column[i] for column in cells],
        }
        for i, config in enumerate(configs)
    ]


def _statuses(runs: Sequence[dict[str, Any]]) -> dict[str, int]:
    counts = dict.fromkeys(STATUSES, 0)
    for run in runs:
        status = str(run.get("status", "unknown"))
        counts[status] = counts.get(status, 0) + 1
    return counts


def _compute(runs: Sequence[dict[str, Any]]) -> dict[str, float]:
    """The steps, tokens, FLOPs and seconds the runs' training consumed (what they recorded)."""
    total = dict.fromkeys(COMPUTE, 0.0)
    for run in runs:
        consumed = run.get("consumed") or {}
        for unit in COMPUTE:
            value = consumed.get(unit)
            if isinstance(value, int | float):
                total[unit] += value
    return total


def _provenance(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each distinct provenance of the runs, with the runs that recorded it."""
    found: dict[str, dict[str, Any]] = {}
    for run in runs:
        recorded = run.get("provenance")
        entry = {
            "code": code_label(recorded) if recorded else "no provenance recorded",
            "versions": ", ".join(
                f"{k} {v}" for k, v in ((recorded or {}).get("versions") or {}).items()
            ),
            "device": (recorded or {}).get("device", ""),
            "precision": (recorded or {}).get("precision", ""),
        }
        key = json.dumps(entry, sort_keys=True)
        found.setdefault(key, {**entry, "runs": [], "command": (recorded or {}).get("command")})
        found[key]["runs"].append(run["run"])
    return list(found.values())


def _run_entry(run: dict[str, Any], single: bool) -> dict[str, Any]:
    """A run's row in the runs table: its settings and the relative links to its files."""
    prefix = "" if single else f"{run['run']}/"
    files = [record_path().name, "checkpoints/", "eval.jsonl", "checkpoints/heads.json"]
    if not single:
        files.insert(0, "report.html")
    return {
        "name": run["run"],
        "status": run.get("status", "unknown"),
        "overrides": run.get("overrides", {}),
        # a fine-tune's task and its class names
        "task": run.get("task"),
        "classes": [str(name) for name in run.get("label_names") or []],
        "settings": json.dumps(run.get("config", {}), indent=1, default=str),
        "links": [(name, prefix + name) for name in files],
        "error": run.get("error"),
    }


def _sweep_target_loss(path: Path) -> float | None:
    """summary.target_loss as the sweep's multirun.yaml recorded it (None without one)."""
    config = path / "multirun.yaml"
    if not config.is_file():
        return None
    written = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    value = (written.get("summary") or {}).get("target_loss")
    return float(value) if isinstance(value, int | float) else None
