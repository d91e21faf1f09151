"""``mode=report``: rebuild the page of a run or sweep directory from its records alone."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from analysis.run_record import record_path
from conf.schema import Settings
from modes.report import report_dir


def run(settings: Settings, callbacks: Sequence[Any] = ()) -> dict[str, Any]:
    from features.report.page import write_report  # matplotlib: only when a page is drawn

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
