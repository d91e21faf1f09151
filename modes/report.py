"""What every command that adds records to a run or sweep directory calls: ``save_evaluations``
writes an evaluation's records, ``refresh`` renders the directory's report again with the
features' pages (``Feature.pages``: ``report.html``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis.records import RESULTS_FILE, append_records, warn
from analysis.run_record import has_record
from conf.features import pages

if TYPE_CHECKING:  # the report's modules load matplotlib: only when a page is drawn
    from analysis.report import Report


def report_dir(path: Path) -> Path | None:
    """The directory whose page ``path`` belongs to: a directory itself, a checkpoint's run
    directory (``RUN/checkpoints/X.ckpt``), None for a file elsewhere."""
    if path.is_dir():
        return path
    run_dir = path.parent.parent
    return run_dir if has_record(run_dir) else None


def save_evaluations(
    target: Path, rows: Sequence[dict[str, Any]], identity: Callable[[dict[str, Any]], str]
) -> Path:
    """An evaluation's records in the ``eval.jsonl`` of ``target`` (or beside a checkpoint
    file), each replacing the record of the same ``identity``; then the page written again."""
    out = append_records(
        (target if target.is_dir() else target.parent) / RESULTS_FILE, rows, identity
    )
    print(f"wrote {out}")
    refresh(target)
    return out


def refresh(path: Path, target_loss: float | None = None, report: Report | None = None) -> None:
    """Write the pages of ``path`` again (of ``report`` when built already), and say so; a page
    that cannot be written is a warning, never the end of the command. No feature renders a
    page: nothing to build."""
    where = report_dir(Path(path))
    renderers = pages()
    if where is None or not renderers:
        return
    from analysis.report import build_report  # matplotlib: only when a page is drawn

    try:
        report = build_report(where, target_loss) if report is None else report
        written = [render(report) for render in renderers] if report is not None else []
    except Exception as err:  # the results are written already: the page must not lose them
        warn(
            f"the page of {where} was not written ({type(err).__name__}: {err}); rebuild it "
            f"with: python train.py mode=report ckpt_path={where}"
        )
        return
    for page in written:
        print(f"tinylm: wrote {page}")
