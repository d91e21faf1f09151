"""``mode=report``: rebuild ``report.html`` of a run or sweep directory; and ``refresh``, which
every command that adds records to a directory calls to write its page again."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis.records import RESULTS_FILE, append_records, warn
from analysis.run_record import has_record, record_path
from conf.schema import Settings

if TYPE_CHECKING:  # the report's modules load matplotlib: only when a page is drawn
    from analysis.report import Report


def run(settings: Settings, callbacks: Sequence[Any] = ()) -> dict[str, Any]:
    from analysis.report_page import write_report  # matplotlib: only when a page is drawn

    target = Path(settings.job.ckpt_path)
    where = report_dir(target)
    written = write_report(where, settings.summary.target_loss) if where else None
    if written is None:
        raise ValueError(
            f"ckpt_path={target} holds no run: pass a run directory (with a "
            f"{record_path().name}), a sweep directory (its runs below it) or a checkpoint "
            "inside a run directory"
        )
    print(f"tinylm: wrote {written}")
    return {"report": str(written)}


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
    """Write the page of ``path`` again (of ``report`` when built already), and say so; a page
    that cannot be written is a warning, never the end of the command."""
    from analysis.report_page import write_page, write_report  # matplotlib: only when drawn

    where = report_dir(Path(path))
    if where is None:
        return
    try:
        written = write_report(where, target_loss) if report is None else write_page(report)
    except Exception as err:  # the results are written already: the page must not lose them
        warn(
            f"report.html of {where} was not written ({type(err).__name__}: {err}); rebuild it "
            f"with: python train.py mode=report ckpt_path={where}"
        )
        return
    if written:
        print(f"tinylm: wrote {written}")
