"""A suite of fine-tunes with one protocol (``finetune.task=glue``, or ``files`` with a mapping
of tasks to folders in GLUE's layout), each task a run of its own, and its table over the
checkpoint's records, where separate seeds and inits meet (README.md, "A suite of tasks")."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import lightning as L

from analysis.records import RESULTS_FILE, append_records, markdown_table
from analysis.records import read_records as read_record_lines
from analysis.run_record import Status, read_record
from common.files import stable_hash, write_text_atomically
from conf.schema import Settings
from features.finetune.config import FINETUNE_INITS, SUITE, FinetuneConfig
from features.finetune.labelled import (
    GLUE,
    default_metric,
    glue_layout_columns,
    glue_split_file,
    glue_unavailable,
)
from features.finetune.one_checkpoint import finetune_checkpoint, protocol_of, protocol_record
from modes import Interrupted

AVERAGE = "average"


def finetune_suite(
    settings: Settings, ckpt: Path, callbacks: Sequence[L.Callback] = ()
) -> dict[str, Any]:
    """Fine-tune ``ckpt`` on every task of the suite (skipping finished ones, resuming an
    interrupted one); the table over the checkpoint's records."""
    finetune = settings.group("finetune")
    tasks = suite_tasks(finetune)
    out_dir = Path(settings.job.output_dir)
    runs = {
        name: _run_task(settings, ft, ckpt, out_dir / name, callbacks) for name, ft in tasks.items()
    }
    values = {name: run[f"test_{run['metric']}"] for name, run in runs.items()}
    pretrained = Path(next(iter(runs.values()))["pretrained"])
    table, rows = suite_table(pretrained, tasks)
    written = write_text_atomically(
        pretrained.parent / f"finetune_suite_{finetune.task}.md",
        f"# Fine-tuning suite on {pretrained}\n\n{_legend(tasks)}\n\n{table}\n",
    )
    _record(pretrained, finetune, tasks, rows)
    print(f"\n{table}\nwrote {written}")
    return {
        "status": Status.COMPLETED,
        "mode": "finetune",
        "task": finetune.task,
        "init": finetune.init,
        "seed": settings.job.seed,
        "pretrained": str(pretrained),
        "metric": AVERAGE,
        f"test_{AVERAGE}": _mean(list(values.values())),
        **{f"test_{name}": value for name, value in values.items()},
        "runs": {name: str(out_dir / name) for name in tasks},
        "table": table,
        "summary": str(written),
    }


def suite_tasks(ft: FinetuneConfig) -> dict[str, FinetuneConfig]:
    """Each task of the suite as the ``finetune`` settings of one fine-tune; the Hub's tasks
    checked before any is trained."""
    if ft.metric is not None:
        raise ValueError(
            f"finetune.metric={ft.metric} with a suite: each task is judged by its own metric; "
            "drop finetune.metric"
        )
    if ft.task == SUITE:
        unavailable = glue_unavailable(list(GLUE))
        if unavailable:
            why, tasks = unavailable
            folders = ", ".join(f"{task}: DIR/{task}" for task in GLUE)
            raise ConnectionError(
                f"finetune.task=glue cannot load {', '.join(tasks)} (the Hugging Face Hub is "
                f"{why}); download them elsewhere into folders in GLUE's layout "
                "(train.jsonl, validation.jsonl; mnli: validation_matched.jsonl) and run the "
                f"suite offline: finetune.task=files 'finetune.path={{{folders}}}'"
            )
        return {task: replace(ft, task=task, path=None) for task in GLUE}
    tasks = {}
    for name, given in (ft.suite() or {}).items():
        folder, problem = _folder_and_problem(name, given)
        if name in GLUE:
            tasks[name] = replace(ft, task=name, path=folder, problem=problem)
            continue
        columns = glue_layout_columns(Path(folder), name)
        tasks[name] = replace(
            ft,
            path={
                "train": str(glue_split_file(Path(folder), "train", name)),
                "test": str(glue_split_file(Path(folder), "validation", name)),
            },
            text_column=columns.text,
            text_pair_column=columns.pair,
            label_column=columns.label,
            problem=problem or "classification",
        )
    return tasks


def _folder_and_problem(name: str, given: Any) -> tuple[str, str | None]:
    if isinstance(given, str):
        return given, None
    if isinstance(given, dict) and set(given) <= {"path", "problem"} and "path" in given:
        return str(given["path"]), given.get("problem")
    raise ValueError(
        f"finetune.path's {name}={given!r} must be a folder in GLUE's layout, or "
        "{path: FOLDER, problem: regression}"
    )


def _run_task(
    settings: Settings,
    ft: FinetuneConfig,
    ckpt: Path,
    run_dir: Path,
    callbacks: Sequence[L.Callback],
) -> dict[str, Any]:
    """One task's fine-tune into ``run_dir``, its metrics: read back when it completed with
    these settings; resumed from its ``last.ckpt`` when it was interrupted."""
    done = read_record(run_dir)
    if done is not None and done.get("status") == Status.COMPLETED:
        if done.get("config") != protocol_record(ft) or done.get("seed") != settings.job.seed:
            raise ValueError(
                f"{run_dir} holds a fine-tune with other settings; give the suite another "
                "output_dir (or the same settings to resume it)"
            )
        print(f"tinylm: {run_dir.name} already fine-tuned ({run_dir}); skipped")
        return done
    last = run_dir / "checkpoints" / "last.ckpt"
    task_settings = replace(
        settings.with_group("finetune", ft), job=replace(settings.job, output_dir=str(run_dir))
    )
    try:
        metrics = finetune_checkpoint(task_settings, last if last.is_file() else ckpt, callbacks)
    except Interrupted as stop:
        raise Interrupted(
            f"the suite stopped in {run_dir.name} ({stop}); run the same command with "
            f"output_dir={run_dir.parent} to resume it, finished tasks skipped",
            stop.exit_code - 128,
        ) from None
    return metrics


def suite_table(
    pretrained: Path, tasks: dict[str, FinetuneConfig]
) -> tuple[str, list[dict[str, Any]]]:
    """The markdown table of the suite over ``pretrained``'s records, and its rows (one per
    init that has records: each task's values by seed)."""
    records = [
        r
        for _, r in read_record_lines(pretrained.parent / RESULTS_FILE)
        if r is not None and r.get("evaluation") == "finetune"
    ]
    rows = []
    for init in FINETUNE_INITS:
        by_task: dict[str, dict[int, float]] = {}
        for name, ft in tasks.items():
            protocol = protocol_of(replace(ft, init=init))
            by_task[name] = {
                r["seed"]: r["value"]
                for r in records
                if r.get("protocol") == protocol and r.get("checkpoint") == str(pretrained)
            }
        if any(by_task.values()):
            rows.append({"init": init, "values": by_task})
    columns = ["init", "seeds", *_headers(tasks), AVERAGE]
    cells = [_cells(row, tasks) for row in rows]
    if len(rows) == 2:
        cells.append(_difference(rows, tasks))
    return markdown_table(columns, [dict(zip(columns, c, strict=True)) for c in cells]), rows


def seed_averages(row: dict[str, Any], tasks: dict[str, Any]) -> dict[int, float]:
    """Per seed that ran every task: the mean of the tasks' values (the suite's score)."""
    seeds = set.intersection(*(set(row["values"][name]) for name in tasks))
    return {seed: _mean([row["values"][name][seed] for name in tasks]) for seed in sorted(seeds)}


def _series(row: dict[str, Any], tasks: dict[str, Any]) -> list[list[float]]:
    """A row's values of each task, then its per-seed averages."""
    averages = list(seed_averages(row, tasks).values())
    return [*(list(row["values"][name].values()) for name in tasks), averages]


def _cells(row: dict[str, Any], tasks: dict[str, Any]) -> list[str]:
    seeds = set().union(*(row["values"][name] for name in tasks))
    return [row["init"], str(len(seeds)), *map(_spread, _series(row, tasks))]


def _difference(rows: list[dict[str, Any]], tasks: dict[str, Any]) -> list[str]:
    """Pretrained minus scratch: the difference of the means, per task and averaged."""
    pretrained, scratch = (_series(row, tasks) for row in rows)
    diffs = zip(pretrained, scratch, strict=True)
    return [
        "pretrained - scratch",
        "",
        *(f"{_mean(a) - _mean(b):+.4f}" if a and b else "" for a, b in diffs),
    ]


def _spread(values: list[float]) -> str:
    if not values:
        return ""
    if len(values) == 1:
        return f"{values[0]:.4f}"
    return f"{_mean(values):.4f} ± {statistics.stdev(values):.4f}"


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _headers(tasks: dict[str, FinetuneConfig]) -> list[str]:
    return [f"{name} ({default_metric(ft.task, ft.problem)})" for name, ft in tasks.items()]


def _legend(tasks: dict[str, FinetuneConfig]) -> str:
    return (
        "Each task's test metric (GLUE's validation split where the task is GLUE's), mean ± "
        "sample standard deviation over the seeds run; average: the mean over the tasks per "
        "seed, over the seeds that ran all of them. Tasks: " + ", ".join(_headers(tasks)) + "."
    )


def _record(
    pretrained: Path, ft: FinetuneConfig, tasks: dict[str, FinetuneConfig], rows: list[dict]
) -> Path:
    """One ``finetune_suite`` record per init in the checkpoint's eval.jsonl: the average."""
    records = []
    for row in rows:
        averages = seed_averages(row, tasks)
        records.append(
            {
                "evaluation": "finetune_suite",
                "checkpoint": str(pretrained),
                "task": ft.task,
                "tasks": {name: default_metric(t.task, t.problem) for name, t in tasks.items()},
                "split": "test",
                "metric": AVERAGE,
                "value": _mean(list(averages.values())) if averages else None,
                "higher_is_better": True,
                "init": row["init"],
                "seeds": list(averages),
                "per_task": {
                    name: _mean(list(values.values())) if values else None
                    for name, values in row["values"].items()
                },
                "protocol": stable_hash(
                    "suite",
                    sorted(protocol_of(replace(t, init=row["init"])) for t in tasks.values()),
                ),
            }
        )

    def identity(r: dict[str, Any]) -> str:
        return stable_hash(
            r.get("evaluation"), r.get("checkpoint"), r.get("init"), r.get("protocol")
        )

    return append_records(pretrained.parent / RESULTS_FILE, records, identity)
