"""``mode=reproduce ckpt_path=RUN``: each chosen run trained again from its record, in a fresh
process with the recorded seed and threads (and by default an empty data cache), into this
command's own directory; its numbers compared with the record's (``compare.py``), the table
written as ``reproduction.md`` and noted in the run's ``reproductions.jsonl``. A number that
moved beyond ``reproduce.tolerance`` ends the command with an error, after everything is written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.records import append_records, markdown_table, warn
from analysis.run_record import (
    Status,
    collect_runs,
    has_record,
    read_record,
    read_run,
    record_path,
)
from common.files import write_text_atomically
from common.provenance import CODE_ROOT, UNKNOWN, code_label, code_version, same_code
from conf.schema import Settings
from data.tokenizer import TOKENIZER_FILE
from features.reproduce.compare import (
    ROW_VERDICTS,
    Row,
    Verdict,
    compare,
    file_row,
    provenance_differences,
)
from features.reproduce.config import ReproduceConfig, ran_on_gpu, tolerance_for
from features.reproduce.replay import replayed_overrides
from modes.report import refresh

HISTORY_FILE = "reproductions.jsonl"  # in the run's directory: each time it was re-run
TABLE_FILE = "reproduction.md"  # in this command's directory: the tables
OWN_KEYS = ("mode", "ckpt_path", "output_dir")  # with reproduce.*: what this mode reads
_SAMPLE_SHOWN = 40  # characters of a text value in a table


@dataclass
class Reproduction:
    """One run re-run: where, how it compared, and what in its provenance differs."""

    name: str
    run_dir: Path
    rerun_dir: Path
    tolerance: float
    rows: list[Row] = field(default_factory=list)
    provenance: list[tuple[str, str, str]] = field(default_factory=list)
    failed: str | None = None  # why the re-run gave no record

    def count(self, verdict: Verdict) -> int:
        return sum(row.verdict == verdict for row in self.rows)

    @property
    def moved(self) -> list[str]:
        """The numbers that moved beyond the tolerance (or that one run lacks)."""
        return [r.name for r in self.rows if r.verdict in (Verdict.DIFFERENT, Verdict.MISSING)]

    @property
    def verdict(self) -> str:
        if self.failed:
            return str(Verdict.FAILED)
        if self.moved:
            return str(Verdict.DIFFERENT)
        return str(Verdict.WITHIN if self.count(Verdict.WITHIN) else Verdict.IDENTICAL)


def run(settings: Settings, callbacks: Sequence[Any] = ()) -> dict[str, Any]:
    config: ReproduceConfig = settings.group("reproduce")
    check_only_own_settings(settings.overrides)
    target = _run_or_sweep(Path(settings.job.ckpt_path))
    runs = chosen_runs(target, config.jobs)
    check_code(runs, config.other_code)
    replays = {name: replayed_overrides(record, run_dir) for name, run_dir, record in runs}
    out_dir = Path(settings.job.output_dir)
    cache = out_dir / "fresh-cache" if config.fresh_cache else None
    try:
        done = [
            rerun(name, run_dir, record, replays[name], out_dir / name, cache, config)
            for name, run_dir, record in runs
        ]
    finally:
        if cache is not None:
            shutil.rmtree(cache, ignore_errors=True)
    text = reproduction_text(done)
    table = write_text_atomically(out_dir / TABLE_FILE, text)
    print(text)
    print(f"tinylm: wrote {table}")
    for reproduction in done:
        note_reproduction(reproduction)
    if target != runs[0][1]:
        refresh(target)  # the sweep's page, with its runs' new notes
    failed = [r for r in done if r.verdict in (Verdict.FAILED, Verdict.DIFFERENT)]
    if failed:
        raise ValueError(
            "not reproduced: "
            + "; ".join(f"{r.name}: {r.failed or _moved_line(r)}" for r in failed)
            + f" (the tables: {table})"
        )
    return {"runs": {r.name: r.verdict for r in done}, "reproduction_md": str(table)}


def check_only_own_settings(overrides: Mapping[str, str]) -> None:
    """A setting of the run's (``model.*``, ``trainer.*``, ...) is refused, not ignored: the
    re-run takes the record's own."""
    other = [k for k in overrides if k not in OWN_KEYS and not k.startswith("reproduce.")]
    if other:
        raise ValueError(
            f"{other[0]} is not read by mode=reproduce, which re-runs the record's own settings: "
            "drop it (to train with other settings, give them to python train.py)"
        )


def _run_or_sweep(path: Path) -> Path:
    """The run or sweep directory ``path`` names (a checkpoint names its run's)."""
    if path.is_file() and path.parent.name == "checkpoints":
        path = path.parent.parent
    if not path.is_dir():
        raise FileNotFoundError(f"ckpt_path={path} is no run or sweep directory")
    return path


def chosen_runs(target: Path, jobs: list[str] | None) -> list[tuple[str, Path, dict[str, Any]]]:
    """(name, directory, record) of each completed run to re-run: ``target`` itself, or the
    sweep's jobs (``jobs`` of them when given); the others are named and left out."""
    if has_record(target):
        if jobs is not None:
            raise ValueError(
                f"reproduce.jobs is for a sweep directory, and {target} is one run: drop it"
            )
        found = [(target.name, target, read_run(target, "it is not re-run"))]
    else:
        records = {run.pop("run"): run for run in collect_runs(target)}  # in job order
        if not records:
            raise ValueError(
                f"{target} holds no {record_path().name}, neither its own nor its jobs': give "
                "a run or sweep directory"
            )
        unknown = [job for job in jobs or () if job not in records]
        if unknown:
            raise ValueError(
                f"reproduce.jobs names {', '.join(unknown)}, which {target} lacks; its "
                f"jobs: {', '.join(records)}"
            )
        found = [
            (name, target / name, record)
            for name, record in records.items()
            if jobs is None or name in jobs
        ]
    chosen = []
    for name, run_dir, record in found:
        status = (record or {}).get("status")
        if status == Status.COMPLETED:
            chosen.append((name, run_dir, record))
        elif status == Status.PRUNED:
            warn(f"{run_dir} was pruned by its search; a run alone has no pruner: not re-run")
        else:
            warn(f"{run_dir} is {status}, with no numbers to reproduce: not re-run")
    if not chosen:
        raise ValueError(f"{target} has no completed run to re-run")
    return chosen


def check_code(runs: Sequence[tuple[str, Path, dict[str, Any]]], other_code: bool) -> None:
    """Refuse runs recorded on other code than this checkout's, unless ``other_code``."""
    now = {"code": code_version()}
    other = [
        (d, r.get("provenance")) for _, d, r in runs if not same_code(r.get("provenance"), now)
    ]
    if not other:
        return
    run_dir, recorded = other[0]
    ran = f"{run_dir} was recorded on {code_label(recorded)}, this checkout is {code_label(now)}"
    if other_code:
        warn(f"{ran}: re-run on this code (reproduce.other_code=true)")
        return
    raise ValueError(
        f"{ran}{f' (and {len(other) - 1} more runs)' if len(other) > 1 else ''}; "
        f"{_way_back(recorded, now)}or give reproduce.other_code=true to re-run it on this code "
        "and see which numbers move"
    )


def _way_back(recorded: Mapping[str, Any] | None, now: Mapping[str, Any]) -> str:
    """How to get the recorded code back, where the record says it."""
    commit = ((recorded or {}).get("code") or {}).get("commit")
    if not commit or commit == UNKNOWN:
        return ""
    if commit != now["code"]["commit"]:
        return f"check out {commit[:7]} to reproduce it, "
    # The same commit: the uncommitted changes differ, and a record keeps only their hash.
    return "set the working tree back as it was (git stash puts today's changes aside), "


def rerun(
    name: str,
    run_dir: Path,
    record: Mapping[str, Any],
    overrides: Mapping[str, str],
    rerun_dir: Path,
    cache: Path | None,
    config: ReproduceConfig,
) -> Reproduction:
    """Train ``run_dir``'s run again into ``rerun_dir`` in a new process, and compare."""
    done = Reproduction(name, run_dir, rerun_dir, tolerance_for(config, record))
    env = dict(os.environ)
    threads = record.get("threads")
    if isinstance(threads, int):  # a sum's order depends on how the threads split it
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    replayed = dict(overrides)
    if ran_on_gpu(record) and "trainer.deterministic" not in replayed:
        warn(f"{run_dir} ran on a GPU: re-run in Lightning's deterministic mode")
        replayed["trainer.deterministic"] = "true"
    if replayed.get("mode") == "finetune":
        replayed["ckpt_path"] = _quoted(pretrained_copy(Path(replayed["ckpt_path"]), rerun_dir))
    if cache is not None:
        env["TINYLM_CACHE"] = str(cache)
        if "data.cache_dir" in replayed:
            replayed["data.cache_dir"] = _quoted(cache)
    command = [
        sys.executable,
        str(CODE_ROOT / "train.py"),
        *(f"{key}={value}" for key, value in replayed.items()),
        f"hydra.run.dir={_quoted(rerun_dir)}",
    ]
    print(f"tinylm: re-running {run_dir} in {rerun_dir}")
    ended = subprocess.run(command, env=env, check=False)
    rerun_record = read_record(rerun_dir) if has_record(rerun_dir) else None
    if ended.returncode != 0 or rerun_record is None:
        done.failed = f"the re-run ended with exit status {ended.returncode} (its output is above)"
        return done
    done.rows = [
        *compare(record, rerun_record, done.tolerance),
        file_row(TOKENIZER_FILE, run_dir / TOKENIZER_FILE, rerun_dir / TOKENIZER_FILE),
    ]
    done.provenance = provenance_differences(record, rerun_record)
    return done


def pretrained_copy(pretrained: Path, rerun_dir: Path) -> Path:
    """The checkpoint a fine-tune re-runs from, linked (else copied) beside its re-run: a
    fine-tune writes its evaluation record beside the checkpoint it fine-tuned, where the
    recorded fine-tune's record must stay as it was."""
    copy = rerun_dir.parent / f"{rerun_dir.name}-pretrained" / "checkpoints" / pretrained.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(pretrained, copy)
    except OSError:  # another filesystem, or one without hard links
        shutil.copy2(pretrained, copy)
    return copy


def _quoted(path: Path) -> str:
    """``path`` as one quoted Hydra value, whatever characters it holds."""
    return "'" + str(path).replace("\\", "\\\\").replace("'", "\\'") + "'"


def reproduction_text(done: Sequence[Reproduction]) -> str:
    """The tables of ``reproduction.md``: per run, its provenance differences and numbers."""
    parts = [
        "# Reproduction\n\nEvery recorded number of each run against its re-run: identical, "
        "within the run's relative tolerance, or different. Times and paths are not compared.\n"
    ]
    for r in done:
        head = (
            f"## {r.name}: {r.verdict}\n\n{r.run_dir} re-run in {r.rerun_dir} (tolerance "
            f"{r.tolerance:g})"
        )
        if r.failed:
            parts.append(f"{head}: {r.failed}.\n")
            continue
        counts = ", ".join(f"{r.count(v)} {v}" for v in ROW_VERDICTS if r.count(v))
        parts.append(f"{head}: {counts}.\n")
        if r.provenance:
            rows = [{"what": w, "recorded": a, "re-run": b} for w, a, b in r.provenance]
            parts.append(markdown_table(("what", "recorded", "re-run"), rows))
        else:
            parts.append("The same code, libraries, device, precision and threads.\n")
        columns = ("number", "recorded", "re-run", "relative difference", "verdict")
        parts.append(markdown_table(columns, [_table_row(row) for row in r.rows]))
    return "\n".join(parts)


def _table_row(row: Row) -> dict[str, str]:
    difference = row.difference
    return {
        "number": row.name,
        "recorded": _shown(row.recorded),
        "re-run": _shown(row.rerun),
        "relative difference": "" if difference is None else f"{difference:.3g}",
        "verdict": str(row.verdict),
    }


def _shown(value: Any) -> str:
    """A value in full (floats as Python writes them back), a long text cut short."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= _SAMPLE_SHOWN else text[:_SAMPLE_SHOWN] + "..."


def _moved_line(r: Reproduction) -> str:
    shown = ", ".join(r.moved[:5]) + (f" and {len(r.moved) - 5} more" if len(r.moved) > 5 else "")
    return f"{len(r.moved)} numbers moved ({shown})"


def note_reproduction(r: Reproduction) -> None:
    """The re-run in the run's ``reproductions.jsonl``, and the run's page written again; a
    directory that cannot be written to (someone else's) is a warning."""
    entry = {
        "reproduced_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "rerun": str(r.rerun_dir),
        "verdict": r.verdict,
        "tolerance": r.tolerance,
        "code": code_label({"code": code_version()}),
        **{str(v): r.count(v) for v in ROW_VERDICTS},
        "moved": r.moved,
        "provenance": [what for what, _, _ in r.provenance],
        "failed": r.failed,
    }
    try:
        append_records(r.run_dir / HISTORY_FILE, [entry], lambda e: e["rerun"])
    except OSError as err:
        warn(f"{r.run_dir} keeps no note of this reproduction ({err})")
        return
    refresh(r.run_dir)
