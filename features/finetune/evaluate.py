"""``mode=eval`` on fine-tuned classifiers: each scored on labelled text (its own task's split,
or the task or file the command line names) through the fine-tuning's own LightningModule, and
recorded in ``eval.jsonl`` (features/finetune/README.md, "Scoring a fine-tuned checkpoint")."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L

from analysis.records import format_value, markdown_table
from analysis.summary import by_configuration
from common.files import stable_hash
from common.provenance import provenance
from conf.schema import Settings
from data.tokenizer import tokenizer_from_json
from features.finetune.checkpoints import load_classifier, problem_of
from features.finetune.config import FinetuneConfig
from features.finetune.encoding import ClassificationDataModule
from features.finetune.labelled import (
    Example,
    RawExample,
    files_examples,
    with_label_ids,
    with_scores,
)
from features.finetune.task import (
    REGRESSION_METRIC_NAMES,
    classification_task_from_hparams,
    metric_names,
)
from modes.report import save_evaluations
from training.checkpoint import check_no_model_overrides, read_checkpoint
from training.precision import native_precision
from training.trainer import evaluation_trainer

COLUMNS = ("checkpoint", "step", "task", "data", "split", "n", "metric", "value", "accuracy")
IDENTITY = ("evaluation", "checkpoint", "data", "data_fingerprint", "split", "metric", "precision")
# The finetune.* keys that choose the labelled text (with finetune.task or finetune.path).
DATA_KEYS = (
    "finetune.text_column",
    "finetune.text_pair_column",
    "finetune.label_column",
    "finetune.val_fraction",
    "finetune.test_fraction",
    "finetune.split_seed",
)
_NAMED = ("finetune.task", "finetune.path")
_LANGUAGE_MODEL_KEYS = ("eval.", "heads.", "data.")  # data.split excepted: the split scored


def run(
    settings: Settings,
    checkpoints: Sequence[Path],
    first: dict[str, Any],
    callbacks: Sequence[L.Callback] = (),
) -> dict[str, Any]:
    """Score every classifier of ``checkpoints`` (``first``: the first one's contents, read
    already) and record the results beside them."""
    _check_options(settings, checkpoints[0], first["hyper_parameters"]["classifier"])
    settings = native_precision(settings)
    stamp = provenance(settings.trainer.precision, settings.trainer.accelerator)
    rows = [
        {
            **evaluate_classifier(
                ckpt, first if i == 0 else read_checkpoint(ckpt), settings, callbacks
            ),
            "provenance": stamp,
        }
        for i, ckpt in enumerate(checkpoints)
    ]
    print(markdown_table(COLUMNS, [{c: format_value(r.get(c)) for c in COLUMNS} for r in rows]))
    for row in rows:
        if "per_class" in row:
            print(f"\n{row['checkpoint']}: per class ({row['split']} of {row['data']})")
            print(per_class_table(row))
    results: dict[str, Any] = {"results": rows}
    if len(checkpoints) > 1:  # a sweep of fine-tunes: its configurations, seeds as replicates
        results["configurations"] = "\n\n".join(
            by_configuration(
                [row for row in rows if row["metric"] == metric],
                metric=metric,
                others=() if metric in ("accuracy", *REGRESSION_METRIC_NAMES) else ("accuracy",),
                higher_is_better=True,
            )
            for metric in dict.fromkeys(row["metric"] for row in rows)
        )
        print(results["configurations"])
    target = Path(settings.job.ckpt_path)
    out = save_evaluations(target, rows, _identity)
    return {**results, "eval_jsonl": str(out)}


def _check_options(settings: Settings, ckpt: Path, classifier: dict[str, Any]) -> None:
    """A classifier given a language model's evaluation options, or fine-tuning settings that
    would change nothing, is refused in one line."""
    task, finetune = classifier["task"], settings.group("finetune")
    if finetune.suite() is not None:
        raise ValueError(
            f"finetune.task={finetune.task} with {finetune.path or 'the Hub'} "
            "is a suite of tasks, for mode=finetune; mode=eval scores one: give one task "
            "(finetune.task=TASK, or finetune.task=files finetune.path=FILE)"
        )
    names = metric_names(problem_of(classifier))
    if "finetune.metric" in settings.overrides and finetune.metric not in names:
        raise ValueError(
            f"finetune.metric={finetune.metric} is not a metric of {ckpt}, a "
            f"{problem_of(classifier)} ({task}); choose one of {', '.join(names[1:])}"
        )
    for key in settings.overrides:
        if key == "data" or (key.startswith(_LANGUAGE_MODEL_KEYS) and key != "data.split"):
            raise ValueError(
                f"{key} is for scoring a language model, but {ckpt} is a classifier "
                f"fine-tuned on {task}: drop it (labelled text to score it on: "
                "finetune.task=files finetune.path=FILE)"
            )
        if key.startswith("finetune.") and key not in (*DATA_KEYS, *_NAMED, "finetune.metric"):
            raise ValueError(
                f"{key} is a fine-tuning setting; mode=eval scores {ckpt} as it was fine-tuned "
                "(examples cut as then): drop it"
            )
    named = any(k in settings.overrides for k in _NAMED)
    loose = [k for k in DATA_KEYS if k in settings.overrides]
    if loose and not named:
        raise ValueError(
            f"{loose[0]} describes the labelled text to score: give it with "
            f"finetune.task=files finetune.path=FILE (without them {ckpt} is scored on its "
            f"own task, {task})"
        )


def evaluate_classifier(
    ckpt: Path, checkpoint: dict[str, Any], settings: Settings, callbacks: Sequence[L.Callback]
) -> dict[str, Any]:
    """Score one fine-tuned checkpoint on the labelled text the settings choose; its record."""
    loaded = load_classifier(ckpt, checkpoint)  # a language model among them: refused
    hparams = loaded.hparams
    check_no_model_overrides(settings, hparams["model_config"], ckpt)
    classifier = hparams["classifier"]
    data, split, raw = labelled_text(settings, ckpt, hparams)
    _check_pairs(ckpt, classifier, raw, data)
    where = f"{data} ({'all of it' if split == 'all' else f'its {split} split'})"
    regression = problem_of(classifier) == "regression"
    examples = (
        with_scores(raw, where)
        if regression
        else with_label_ids(raw, classifier["label_names"], where, classifier=str(ckpt))
    )
    module = classification_task_from_hparams(hparams)
    module.load_state_dict(checkpoint["state_dict"])
    protocol = hparams["finetune_config"]
    datamodule = ClassificationDataModule(
        {"test": examples},
        tokenizer_from_json(hparams["tokenizer_json"]),
        loaded.config,
        max_len=protocol["max_seq_len"] or loaded.config.max_seq_len,
        batch_size=protocol["batch_size"],
    )
    trainer = evaluation_trainer(settings, callbacks)
    scores = trainer.test(module, datamodule=datamodule, verbose=False)[0]
    metric = settings.group("finetune").metric or classifier["metric"]
    names = metric_names(problem_of(classifier))
    metrics = {name: float(scores[f"test/{name}"]) for name in names}
    counts = (
        {}
        if regression
        else {
            "label_names": classifier["label_names"],
            "confusion": module.confusion["test"],
            "per_class": per_class(classifier["label_names"], module.confusion["test"]),
        }
    )
    return {
        "evaluation": "classifier",
        "checkpoint": str(ckpt.resolve()),
        "step": loaded.global_step,
        "arch": loaded.config.arch,
        "task": classifier["task"],
        "data": data,
        "data_fingerprint": stable_hash([list(example) for example in raw]),
        "split": split,
        "n": len(examples),
        "metric": metric,
        "value": metrics[metric],
        "higher_is_better": True,
        **metrics,
        **counts,
        "precision": settings.trainer.precision,
    }


def labelled_text(
    settings: Settings, ckpt: Path, hparams: dict[str, Any]
) -> tuple[str, str, list[RawExample]]:
    """(what is scored, its split, its examples with labels by name): the checkpoint's own
    task, or the task or file the command line names."""
    overrides = settings.overrides
    split = settings.data.split if "data.split" in overrides else "test"
    if not any(k in overrides for k in _NAMED):
        stored = FinetuneConfig(**hparams["finetune_config"])
        try:
            task = stored.labelled_task()
        except FileNotFoundError as err:
            raise FileNotFoundError(
                f"{ckpt} was fine-tuned on {stored.path}, not found from here ({err}); run from "
                "where it was fine-tuned, or name the file: finetune.task=files "
                "finetune.path=FILE"
            ) from None
        name = str(stored.path) if stored.task == "files" else stored.task
        return name, split, _named_labels(task.splits[split], task.label_names)
    ft = settings.group("finetune")
    if ft.task != "files":
        task = ft.labelled_task()
        return ft.task, split, _named_labels(task.splits[split], task.label_names)
    splits = files_examples(ft.path, ft.columns())
    if isinstance(ft.path, str):  # one file: all of it
        return ft.path, "all", splits["train"]
    if split not in splits:
        raise ValueError(
            f"finetune.path={ft.path} has no {split} split: give it one, or choose "
            f"data.split={' or '.join(s for s in ('validation', 'test') if s in splits)}"
        )
    return ft.path[split], split, splits[split]


def _named_labels(examples: Sequence[Example], names: Sequence[str]) -> list[RawExample]:
    """The examples with their labels by name again (a regression's: its scores)."""
    return [(e.text, e.pair, names[e.label] if names else e.label) for e in examples]


def _check_pairs(
    ckpt: Path, classifier: dict[str, Any], raw: Sequence[RawExample], data: str
) -> None:
    with_pairs = any(pair is not None for _, pair, _ in raw)
    if classifier["has_pairs"] and not with_pairs:
        raise ValueError(
            f"{ckpt} classifies text pairs ({classifier['task']}) but {data} gives one text "
            "per example: name the second text's column with finetune.text_pair_column="
        )
    if with_pairs and not classifier["has_pairs"]:
        raise ValueError(
            f"{ckpt} classifies single texts ({classifier['task']}) but {data} gives pairs: "
            "drop finetune.text_pair_column"
        )


def per_class(names: Sequence[str], confusion: Sequence[Sequence[int]]) -> dict[str, Any]:
    """Per class: its examples (n), how many were predicted as it, how many of it correctly."""
    return {
        name: {
            "n": sum(confusion[i]),
            "predicted": sum(row[i] for row in confusion),
            "correct": confusion[i][i],
        }
        for i, name in enumerate(names)
    }


def per_class_table(record: dict[str, Any]) -> str:
    rows = [
        {
            "class": name,
            **counts,
            "recall": format_value(counts["correct"] / counts["n"]) if counts["n"] else "",
        }
        for name, counts in record["per_class"].items()
    ]
    return markdown_table(("class", "n", "predicted", "correct", "recall"), rows)


def _identity(record: dict[str, Any]) -> str:
    return stable_hash(*(record.get(key) for key in IDENTITY))
