"""``report.html``: every number recorded for a sweep (or one run) on one page that a browser
opens from disk: one rendering of its report (``analysis/report.py``), written by
``write_page``, this feature's ``Feature.pages`` hook. A Jinja2 template with autoescaping, so
every string that comes from a run (errors, labels, file names, swept values) is shown as
text; its images are data URIs and its only script sorts the table and picks a heatmap.
"""

from __future__ import annotations

import base64
import functools
import json
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jinja2

from analysis.records import RESULTS_FILE
from analysis.report import Report, build_report
from analysis.run_record import Status, record_path
from common.files import write_text_atomically
from common.provenance import code_label

REPORT_FILE = "report.html"
TEMPLATES = Path(__file__).parent / "templates"
STATUSES = (Status.COMPLETED, Status.FAILED, Status.PRUNED)  # always counted, even at zero
COMPUTE = ("steps", "tokens", "flops", "seconds")


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
    return {
        "title": f"{'Run' if single else 'Sweep'} {report.root}",
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
        "rows": [(c, [column[i] for column in report.cells]) for i, c in enumerate(report.configs)],
        "heatmaps": report.heatmaps,
        "figures": [(f.title, svg_uri(f.draw)) for f in report.figures if f.on_page],
        "failed": [r for r in runs if r.get("status") == Status.FAILED],
        "runs": [_run_entry(r, single, report.run_files) for r in runs],
        "records": report.records if single else [],
        "sample": runs[0].get("sample") if single else None,
        "target_loss": report.target_loss,
    }


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
            "versions": ", ".join(f"{k} {v}" for k, v in (recorded.get("versions") or {}).items()),
            "device": recorded.get("device", ""),
            "precision": recorded.get("precision", ""),
        }
        key = json.dumps(entry, sort_keys=True)
        found.setdefault(key, {**entry, "runs": [], "command": recorded.get("command")})
        found[key]["runs"].append(run["run"])
    return list(found.values())


def _run_entry(run: dict[str, Any], single: bool, extra: Sequence[str]) -> dict[str, Any]:
    """A run's row in the runs table: its settings and the relative links to its files."""
    prefix = "" if single else f"{run['run']}/"
    files = [record_path().name, "checkpoints/", RESULTS_FILE, *extra]
    if not single:
        files.insert(0, REPORT_FILE)
    return {
        "name": run["run"],
        "status": run.get("status", "unknown"),
        "overrides": run.get("overrides", {}),
        # a fine-tune's task and its class names
        "task": run.get("task"),
        "classes": [str(name) for name in run.get("label_names") or []],
        "settings": json.dumps(run.get("config", {}), indent=1, default=str),
        "links": [(name, prefix + name) for name in files],
    }
