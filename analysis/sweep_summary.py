"""The summary files of a sweep directory, one rendering of its report (``analysis/report.py``):
``summary.md`` (configurations, then runs), ``summary.csv`` (configurations), ``runs.csv``
(runs) and the report's figures that have a file.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from analysis.records import format_value, markdown_table
from analysis.report import Report, build_report
from analysis.significance import ALPHA
from analysis.summary import configuration_table
from analysis.time_to_target import UNITS, target_section
from common.files import write_text_atomically

# The columns of runs.csv after the swept keys: these two even when not swept.
_FIXED_KEYS = ("model.num_heads", "model.dropout")
# summary.csv's judgement of each configuration against the best, after the metric's mean and std
_VERDICTS = ("vs_best", "exceeds_2se", "welch_p", "holm_p", "holm_significant")
_TARGET_COLUMNS = (
    "reached",
    *(f"{unit}_to_target_{stat}" for unit in UNITS for stat in ("mean", "std")),
)


def write_sweep_summary(sweep_dir: Path, target_loss: float | None = None) -> list[Path]:
    """The summary files of ``build_report(sweep_dir, target_loss)``; the paths written."""
    report = build_report(sweep_dir, target_loss)
    return [] if report is None else write_summary_files(report)


def write_summary_files(report: Report) -> list[Path]:
    """The summary files of a sweep's ``report``; the paths written."""
    root, ranked = report.root, report.ranked
    run_columns = [
        "run",
        *report.swept,
        *(c for c in _FIXED_KEYS if c not in report.swept),
        *ranked.run_columns,
        "error",
    ]
    run_rows = [{c: format_value(_run_value(run, c)) for c in run_columns} for run in report.runs]
    # configuration_rows names the compared metric's statistics best_val_loss_*: the csv
    # names them by the metric
    rows = [
        {
            **row,
            f"{ranked.metric}_mean": row["best_val_loss_mean"],
            f"{ranked.metric}_std": row["best_val_loss_std"],
        }
        for row in report.rows
    ]
    numbers = [f"{ranked.metric}_mean", f"{ranked.metric}_std", *_VERDICTS]
    target = _TARGET_COLUMNS if report.target_loss is not None else ()
    summary_columns = [*report.keys, "n", "failed", *numbers, *ranked.means, *target]
    written = [
        _write_csv(root / "summary.csv", summary_columns, rows),
        _write_csv(root / "runs.csv", run_columns, run_rows),
    ]
    explanation = _explanation(report)
    if report.mixed:
        explanation += f"\n\nProvenance: {report.mixed}"
    sections = [
        f"# Sweep {root}\n\n{explanation}\n\n## Configurations\n\n"
        + configuration_table(report.configs, report.rows, ranked.means)
    ]
    if report.target_loss is not None:
        sections.append(target_section(report.configs, report.rows, report.target_loss))
    sections += report.sections
    sections.append("## Runs\n\n" + markdown_table(run_columns, run_rows))
    sections += report.appendix
    written.append(write_text_atomically(root / "summary.md", "\n".join(sections)))
    written += [figure.draw(root / figure.file) for figure in report.figures if figure.file]
    return written


def _explanation(report: Report) -> str:
    ranked, configs, rows = report.ranked, report.configs, report.rows
    highest = " (the highest)" if ranked.higher_is_better else ""
    text = (
        f"{len(report.runs)} runs in {len(configs)} configurations. {ranked.metric} is the "
        "mean ± sample standard deviation over a configuration's completed runs (seeds are "
        f"replicates); vs_best is its difference from the best configuration's mean{highest}, "
        '"> 2 SE" when that exceeds two standard errors of the difference. p_welch is '
        "the two-sided p-value of Welch's t-test against the best configuration, holm its "
        f"Holm-adjusted value over {_comparisons(rows)} with the best, significant at "
        f"<= {ALPHA} (the family-wise error rate). The best is "
        "chosen from the same runs, so its lead is optimistic: confirm it with new seeds."
    )
    if report.sampled:
        text += f" {report.sampled}"
    elif min(c.n for c in configs) < 2:
        text += (
            " Configurations with fewer than 2 completed runs have no known spread and their "
            "differences are not judged; add seeds (e.g. seed=1,2,3) to judge them."
        )
    beyond = [c.label() for c, row in zip(configs, rows, strict=True) if row["exceeds_2se"]]
    if beyond:
        text += f" Worse than the best beyond noise: {'; '.join(beyond)}."
    return text + "".join(f" {note}" for note in report.notes)


def _comparisons(rows: Sequence[dict[str, Any]]) -> str:
    tested = sum(row["welch_p"] is not None for row in rows)
    return f"the {tested} comparison{'' if tested == 1 else 's'}"


def _run_value(run: dict[str, Any], column: str) -> Any:
    return {**run.get("config", {}), **run.get("overrides", {}), **run}.get(column)


def _write_csv(path: Path, columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> Path:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)  # None and a missing column are written as ""
    return path
