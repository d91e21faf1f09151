"""A suite of fine-tunes (finetune.task=files with task -> folder in GLUE's layout): two tasks
end to end, interrupted and resumed task by task, its table against the per-task records,
pretrained against scratch; GLUE from the Hub refused offline at once."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import lightning as L
import pytest

from features.finetune.labelled import load_task
from modes import Interrupted
from tests.features.finetune.test_finetune import copy_checkpoint, finetune
from tests.features.finetune.test_regression import score_file

QUICK = ["finetune.batch_size=16", "finetune.epochs=2", "finetune.lr=3e-3"]


class SignalInFit(L.Callback):
    """SIGTERM at ``step`` of the ``fit``-th fit of the process (1: the first)."""

    def __init__(self, fit: int, step: int) -> None:
        self.fit, self.step, self.fits = fit, step, 0

    def on_fit_start(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        self.fits += 1

    def on_train_batch_end(self, trainer: L.Trainer, *args: object) -> None:
        if self.fits == self.fit and trainer.global_step == self.step:
            self.fits += 1  # once
            os.kill(os.getpid(), signal.SIGTERM)


def _glue_folder(folder: Path, rows: list[dict], split_at: int) -> str:
    folder.mkdir(parents=True)
    for name, part in (("train", rows[:split_at]), ("validation", rows[split_at:])):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part))
    return str(folder)


@pytest.fixture(scope="module")
def suite(tiny_checkpoints, tmp_path_factory) -> dict:
    """sst2 (GLUE's name: its columns and metric) and count (a regression of one's own), from
    folders in GLUE's layout; the suite interrupted in its second task, then run again."""
    root = tmp_path_factory.mktemp("suite")
    scores = [json.loads(line) for line in score_file(root / "s.jsonl").read_text().splitlines()]
    sst2 = [
        {"sentence": r["text"], "label": int(r["label"] > 0.05), "idx": i}
        for i, r in enumerate(scores)
    ]
    count = [{"sentence": r["text"], "label": r["label"]} for r in scores]
    folders = {
        "sst2": _glue_folder(root / "glue" / "sst2", sst2, 64),
        "count": _glue_folder(root / "glue" / "count", count, 64),
    }
    mapping = (
        f"{{sst2: {folders['sst2']}, count: {{path: {folders['count']}, problem: regression}}}}"
    )
    task = ["finetune.task=files", f"finetune.path={mapping}", *QUICK]
    pre = copy_checkpoint(tiny_checkpoints["encoder"], root)
    out = root / "out"
    with pytest.raises(Interrupted, match=f"stopped in count .*output_dir={out} to resume"):
        finetune(pre, out, *task, callbacks=[SignalInFit(fit=2, step=3)])
    first = json.loads((out / "sst2" / "metrics.json").read_text())
    assert first["status"] == "completed"
    assert (out / "count" / "checkpoints" / "last.ckpt").is_file()
    resumed = finetune(pre, out, *task)
    return {"root": root, "pre": pre, "task": task, "out": out, "first": first, "result": resumed}


def _records(pre: Path) -> list[dict]:
    lines = (pre.parent / "eval.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_suite_resumes_task_by_task_and_its_average_is_the_records_mean(suite, capsys) -> None:
    out, result = suite["out"], suite["result"]
    again = json.loads((out / "sst2" / "metrics.json").read_text())
    assert again["finished_at"] == suite["first"]["finished_at"]  # not run again
    count = json.loads((out / "count" / "metrics.json").read_text())
    assert count["status"] == "completed" and count["step"] == 2 * 4  # resumed to its end
    assert count["problem"] == "regression" and count["metric"] == "pearson_spearman"
    records = [r for r in _records(suite["pre"]) if r["evaluation"] == "finetune"]
    by_metric = {r["metric"]: r["value"] for r in records}
    assert by_metric == {
        "accuracy": suite["first"]["test_accuracy"],
        "pearson_spearman": count["test_pearson_spearman"],
    }
    average = sum(by_metric.values()) / 2
    assert result["test_average"] == pytest.approx(average)
    (row,) = [line for line in result["table"].splitlines() if line.startswith("| pretrained")]
    assert row.split(" | ")[1:] == [
        "1",
        f"{by_metric['accuracy']:.4f}",
        f"{by_metric['pearson_spearman']:.4f}",
        f"{average:.4f} |",
    ]
    written = (suite["pre"].parent / "finetune_suite_files.md").read_text()
    assert result["table"] in written and "sst2 (accuracy)" in written
    (summary,) = [r for r in _records(suite["pre"]) if r["evaluation"] == "finetune_suite"]
    assert summary["value"] == pytest.approx(average) and summary["seeds"] == [
        suite["first"]["seed"]
    ]
    assert summary["tasks"] == {"sst2": "accuracy", "count": "pearson_spearman"}


def test_scratch_beside_pretrained_adds_a_row_and_their_difference(suite) -> None:
    # The same protocol but the init: a row of its own beside pretrained's (another protocol,
    # finetune.max_steps=2 say, would be another table).
    result = finetune(
        suite["pre"], suite["root"] / "scratch", *suite["task"], "finetune.init=scratch"
    )
    rows = {
        line.split(" | ")[0][2:]: line.split(" | ") for line in result["table"].splitlines()[2:]
    }
    assert set(rows) == {"pretrained", "scratch", "pretrained - scratch"}
    pretrained = float(rows["pretrained"][-1].rstrip(" |"))
    scratch = float(rows["scratch"][-1].rstrip(" |"))
    assert float(rows["pretrained - scratch"][-1].rstrip(" |")) == pytest.approx(
        pretrained - scratch, abs=2e-4
    )
    inits = {r["init"] for r in _records(suite["pre"]) if r["evaluation"] == "finetune_suite"}
    assert inits == {"pretrained", "scratch"}


def test_a_glue_task_from_a_local_folder(suite, tmp_path) -> None:
    rows = [
        {"sentence1": f"a {i}", "sentence2": f"b {i}", "label": i / 4, "idx": i} for i in range(20)
    ]
    folder = _glue_folder(tmp_path / "stsb", rows, 15)
    task = load_task("stsb", path=folder)
    assert task.problem == "regression" and task.has_pairs and task.metric == "pearson_spearman"
    assert [e.label for e in task.splits["test"]] == [i / 4 for i in range(15, 20)]
    with pytest.raises(FileNotFoundError, match=r"needs one validation file .*it has \['train"):
        (Path(folder) / "validation.jsonl").unlink()
        load_task("stsb", path=folder)


def test_glue_offline_fails_at_once_naming_the_tasks(suite, tmp_path) -> None:
    with pytest.raises(ConnectionError) as err:
        finetune(suite["pre"], tmp_path / "glue", "finetune.task=glue")
    message = str(err.value)
    assert "\n" not in message and not (tmp_path / "glue").exists()
    assert re.search(
        r"finetune.task=glue cannot load cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli "
        r"\(the Hugging Face Hub is offline.*finetune.task=files 'finetune.path=\{cola: DIR/cola",
        message,
    ), message
