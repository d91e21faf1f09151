"""``report.html``: every number recorded for a sweep (or one run) on one page that a browser
opens from disk: one rendering of its report (``analysis/report.py``), written by
``write_page``, this feature's ``Feature.pages`` hook. A run's page starts with its training
curves and what the run is (the changed settings, then all of them folded; the model's size;
where the time went); a sweep's shows the curves of one configuration at a time, chosen in a
list. A Jinja2 template with autoescaping, so every string that comes from a run (errors,
labels, file names, swept values) is shown as text; its images are data URIs and its only
script sorts the table and picks a heatmap or a configuration's curves.
"""

from __future__ import annotations

import base64
import functools
import json
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from analysis.plots import Heatmap, heatmap
from analysis.records import RESULTS_FILE
from analysis.report import Report, build_report
from analysis.report_columns import Column, run_dirs
from analysis.run_record import HEADLINE, Status, record_path
from analysis.summary import Configuration, configuration_rows, group_runs
from common.files import write_text_atomically
from common.provenance import code_label, recorded_versions
from features.report.run_curves import CurveSet, configuration_sets, curve_set, run_curves
from training.curves import CURVES_FILE

REPORT_FILE = "report.html"
TEMPLATES = Path(__file__).parent / "templates"
STATUSES = (Status.COMPLETED, Status.FAILED, Status.PRUNED)  # always counted, even at zero
COMPUTE = ("steps", "tokens", "flops", "seconds")
# Where a run's time went (its record's seconds), as the page names each part.
TIME_PARTS = {
    "data": "data and tokenizer",
    "training": "training",
    "validation": "validation",
    "sample": "sample",
}


@dataclass
class Cell:
    """A column's statistics for one configuration (``configuration_rows``' row)."""

    mean: float | None
    std: float | None
    n: int
    best: bool
    exceeds_2se: bool | None
    holm_p: float | None
    holm_significant: bool | None


def write_report(path: Path, target_loss: float | None = None) -> Path | None:
    """``report.html`` of ``build_report(path, target_loss)``; None when it holds no run."""
    report = build_report(path, target_loss)
    return None if report is None else write_page(report)


def write_page(report: Report) -> Path:
    """``report.html`` of ``report``, in its directory."""
    page = _template().render(**page_context(report))
    return write_text_atomically(report.root / REPORT_FILE, page)


def page_context(report: Report) -> dict[str, Any]:
    """What the template shows."""
    runs, single = report.runs, report.single
    grouped = column_groups(report)
    dirs = run_dirs(report.root, runs)
    if single:
        curves = run_curves(report.root, runs[0])
        sets, left_out = [curve_set([curves])], 0
    else:
        sets, left_out = configuration_sets(report.configs, dirs)
    return {
        "title": f"{'Run' if single else 'Sweep'} {report.root}",
        "single": single,
        "run": describe_run(runs[0], curves.resumed) if single else None,
        "curve_sets": [_drawn(s) for s in sets if s.figures],
        "curves_left_out": left_out,
        "swept": {
            k: sorted({str(r.get("overrides", {}).get(k)) for r in runs}) for k in report.keys
        },
        "statuses": _statuses(runs),
        "compute": _compute(runs),
        "provenance": _provenance(runs),
        "mixed": report.mixed,
        "keys": report.keys,
        "columns": report.columns,
        # each configuration with its cell in each column
        "rows": [(c, [cells[i] for _, cells in grouped]) for i, c in enumerate(report.configs)],
        "heatmaps": heatmaps(report, grouped),
        "figures": [(f.title, svg_uri(f.draw)) for f in report.figures if f.on_page],
        "failed": [r for r in runs if r.get("status") == Status.FAILED],
        "runs": [
            _run_entry(r, dirs[r["run"]], single, report.run_files, report.run_notes) for r in runs
        ],
        "records": report.records if single else [],
        "sample": runs[0].get("sample") if single else None,
        "target_loss": report.target_loss,
    }


def describe_run(run: dict[str, Any], resumed: Sequence[int] = ()) -> dict[str, Any]:
    """What a run's page says the run is: the settings its command changed, then every
    setting (group.key -> value), the model's size and where its time went (``resumed``: the
    steps it resumed at; its record's times are its last process's)."""
    seconds = run.get("seconds") or {}
    time = [(TIME_PARTS.get(k, k), v) for k, v in seconds.items() if isinstance(v, int | float)]
    return {
        "overrides": run.get("overrides") or {},
        "settings": _flat(run.get("settings") or run.get("config") or {}),
        "arch": run.get("arch"),
        "results": [
            (name, run[name]) for name in HEADLINE if isinstance(run.get(name), int | float)
        ],
        "params": run.get("params"),
        "params_with_embeddings": run.get("params_with_embeddings"),
        "time": time,
        "total_seconds": sum(v for _, v in time),
        "resumed": list(resumed),
    }


def column_groups(report: Report) -> list[tuple[list[Configuration], list[Cell]]]:
    """Each column of ``report`` grouped by configuration: its configurations and cells."""
    return [column_cells(column, report.runs, report.keys) for column in report.columns]


def column_cells(
    column: Column, runs: Sequence[dict[str, Any]], keys: Sequence[str]
) -> tuple[list[Configuration], list[Cell]]:
    """``column`` grouped by configuration over ``keys``: the configurations and their cells."""
    valued = [{**run, column.key: column.values.get(run["run"])} for run in runs]
    higher = bool(column.higher_is_better)
    configs = group_runs(valued, keys, metric=column.key, higher_is_better=higher)
    rows = configuration_rows(configs, means=())
    cells = [
        Cell(
            mean=row["best_val_loss_mean"],
            std=row["best_val_loss_std"],
            n=row["n"],
            best=column.judged and row["is_best"],
            exceeds_2se=row["exceeds_2se"] if column.judged else None,
            holm_p=row["holm_p"] if column.judged else None,
            holm_significant=row["holm_significant"] if column.judged else None,
        )
        for row in rows
    ]
    return configs, cells


def heatmaps(
    report: Report, grouped: Sequence[tuple[list[Configuration], list[Cell]]]
) -> list[Heatmap]:
    """One per judged column with a value (``grouped``: ``column_groups(report)``), over the
    swept keys; none for sampled configurations (their values fill a cell per row and column)."""
    if not report.keys or report.sampled is not None:
        return []
    return [
        heatmap(configs, report.keys, column.title, column.key)
        for column, (configs, cells) in zip(report.columns, grouped, strict=True)
        if column.judged and any(c.mean is not None for c in cells)
    ]


def svg_uri(draw: Callable[[Path], Path]) -> str:
    """What ``draw`` writes to the SVG file it is given, as a data URI."""
    with tempfile.TemporaryDirectory() as tmp:
        data = draw(Path(tmp) / "figure.svg").read_bytes()
    return "data:image/svg+xml;base64," + base64.b64encode(data).decode("ascii")


@functools.cache
def _template() -> jinja2.Template:
    """Compiled once a process: every eval or finetune record rewrites the page."""
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


def _statuses(runs: Sequence[dict[str, Any]]) -> dict[str, int]:
    counts = dict.fromkeys(STATUSES, 0)
    counts.update(Counter(str(run.get("status", "unknown")) for run in runs))
    return counts


def _compute(runs: Sequence[dict[str, Any]]) -> dict[str, float]:
    """The steps, tokens, FLOPs and seconds the runs' training consumed (what they recorded)."""
    consumed = [run.get("consumed") or {} for run in runs]
    return {
        unit: sum(c[unit] for c in consumed if isinstance(c.get(unit), int | float))
        for unit in COMPUTE
    }


def _provenance(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each distinct provenance of the runs, with the runs that recorded it."""
    found: dict[str, dict[str, Any]] = {}
    for run in runs:
        recorded = run.get("provenance") or {}
        entry = {
            "code": code_label(recorded) if recorded else "no provenance recorded",
            "versions": ", ".join(f"{k} {v}" for k, v in recorded_versions(recorded).items()),
            "device": recorded.get("device", ""),
            "precision": recorded.get("precision", ""),
        }
        key = json.dumps(entry, sort_keys=True)
        found.setdefault(key, {**entry, "runs": [], "command": recorded.get("command")})
        found[key]["runs"].append(run["run"])
    return list(found.values())


def _run_entry(
    run: dict[str, Any],
    run_dir: Path,
    single: bool,
    extra: Sequence[str],
    notes: dict[str, list[str]],
) -> dict[str, Any]:
    """A run's row in the runs table: its settings, the relative links to those of its files
    that exist (an evaluation's or a head analysis's once its command has run) and what
    features note of it."""
    prefix = "" if single else f"{run['run']}/"
    files = [record_path().name, CURVES_FILE, "checkpoints/", RESULTS_FILE]
    files += [f"checkpoints/{RESULTS_FILE}", *extra]  # a checkpoint's own evaluations
    if not single:
        files.insert(0, REPORT_FILE)
    return {
        "name": run["run"],
        "status": run.get("status", "unknown"),
        "overrides": run.get("overrides", {}),
        # a fine-tune's task and its class names
        "task": run.get("task"),
        "classes": [str(name) for name in run.get("label_names") or []],
        "settings": json.dumps(run.get("settings") or run.get("config", {}), indent=1, default=str),
        "links": [
            (name, prefix + name)
            for name in dict.fromkeys(files)
            if (run_dir / name.rstrip("/")).exists()
        ],
        "notes": notes.get(run["run"], []),
    }


def _drawn(curves: CurveSet) -> dict[str, Any]:
    """A curve set as the page shows it: its label and its figures as data URIs."""
    return {
        "label": curves.label,
        "figures": [(title, svg_uri(draw)) for title, draw in curves.figures],
    }


def _flat(settings: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """(group.key, value) of nested settings, a value as the command line writes it."""
    rows = []
    for key, value in settings.items():
        if isinstance(value, dict) and value:
            rows += _flat(value, f"{prefix}{key}.")
        else:
            rows.append((f"{prefix}{key}", value if isinstance(value, str) else json.dumps(value)))
    return rows
