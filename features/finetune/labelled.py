"""Labelled text for fine-tuning: the examples (text, optional second text, label) of each
split of a task (``builtin``, ``files`` or a GLUE task), read whole into memory and checked
(features/finetune/README.md, "Tasks" and "Regression")."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.records import natural_key
from data.hub import hub_unavailable_reason
from data.sources import SPLITS, builtin_documents

BUILTIN_TOPICS = 8  # the topics with the most paragraphs: 1114 of them on CPython 3.11
BUILTIN_MIN_CHARS = 40  # shorter paragraphs are headings and one-line examples
_PARAGRAPH_BREAK = re.compile(r"\n(?:[ \t]*\n)+")
FILE_SUFFIXES = (".csv", ".jsonl", ".parquet")
PROBLEMS = ("classification", "regression")
CLASSIFICATION_METRICS = ("accuracy", "f1", "mcc")
# GLUE reports STS-B by the mean of the two correlations (pearson_spearman).
REGRESSION_METRICS = ("pearson_spearman", "pearson", "spearman")


@dataclass(frozen=True)
class GlueTask:
    """A GLUE task as ``datasets`` names it: its text columns and the metric it is known by."""

    text: str
    pair: str | None
    metric: str
    validation: str = "validation"
    problem: str = "classification"


# GLUE's test labels are hidden (-1): its validation split is the test here, and validation
# is carved from train.
GLUE = {  # in the benchmark's order
    "cola": GlueTask("sentence", None, "mcc"),
    "sst2": GlueTask("sentence", None, "accuracy"),
    "mrpc": GlueTask("sentence1", "sentence2", "f1"),
    "stsb": GlueTask("sentence1", "sentence2", "pearson_spearman", problem="regression"),
    "qqp": GlueTask("question1", "question2", "f1"),
    "mnli": GlueTask("premise", "hypothesis", "accuracy", "validation_matched"),
    "qnli": GlueTask("question", "sentence", "accuracy"),
    "rte": GlueTask("sentence1", "sentence2", "accuracy"),
    "wnli": GlueTask("sentence1", "sentence2", "accuracy"),
}
TASKS = ("builtin", "files", *GLUE)


@dataclass(frozen=True)
class Example:
    text: str
    pair: str | None
    label: int | float  # a class id, or a regression's score


@dataclass(frozen=True)
class LabelledTask:
    """A task's examples per split (train, validation, test) and its class names (none for a
    regression)."""

    name: str
    splits: dict[str, list[Example]]
    label_names: list[str]
    has_pairs: bool
    metric: str  # the metric the task is known by: CLASSIFICATION_ or REGRESSION_METRICS
    problem: str = "classification"


@dataclass(frozen=True)
class Columns:
    text: str = "text"
    pair: str | None = None
    label: str = "label"


RawExample = tuple[str, "str | None", Any]  # text, pair, label as the source has it


def load_task(
    task: str,
    *,
    path: str | dict[str, str] | None = None,
    columns: Columns = Columns(),
    val_fraction: float = 0.1,
    test_fraction: float = 0.1,
    split_seed: int = 0,
    metric: str | None = None,
    problem: str | None = None,
) -> LabelledTask:
    """The checked examples of ``task`` (one of ``TASKS``); ``problem`` None: the task's own.
    A GLUE task with ``path`` reads that folder in GLUE's layout instead of the Hub."""
    own = GLUE[task].problem if task in GLUE else "classification"
    if problem is not None and problem != own and task != "files":
        raise ValueError(
            f"finetune.problem={problem} does not fit finetune.task={task}, a {own}: drop "
            "finetune.problem"
        )
    if task == "builtin":
        if columns.pair is not None:
            raise ValueError(_no_pairs("the builtin task (one paragraph per example)"))
        raw, has_pairs = {"train": builtin_examples()}, False
    elif task == "files":
        raw, has_pairs = files_examples(path, columns), columns.pair is not None
        own = problem or _files_problem(raw["train"], path)
    else:
        glue = GLUE[task]
        if columns.pair is not None and glue.pair is None:
            raise ValueError(_no_pairs(f"GLUE's {task} (single sentences)"))
        read = _glue_folder if isinstance(path, str) else _glue_examples
        raw, has_pairs = read(task, glue, path), glue.pair is not None
    raw = carve_missing(raw, val_fraction, test_fraction, split_seed)
    if own == "regression":
        splits = {split: with_scores(rows, f"the {split} split") for split, rows in raw.items()}
        if len({e.label for e in splits["train"]}) < 2:
            raise ValueError(
                "every train example has the same score: a regression needs scores that vary; "
                "check finetune.label_column"
            )
        names: list[str] = []
    else:
        names = label_names(raw["train"])
        splits = {
            split: with_label_ids(examples, names, f"the {split} split")
            for split, examples in raw.items()
        }
    return LabelledTask(
        name=task,
        splits=splits,
        label_names=names,
        has_pairs=has_pairs,
        metric=metric or default_metric(task, own),
        problem=own,
    )


def default_metric(task: str, problem: str | None) -> str:
    """The metric a task is known by: GLUE's own, else accuracy or a regression's
    pearson_spearman."""
    if task in GLUE:
        return GLUE[task].metric
    return REGRESSION_METRICS[0] if problem == "regression" else CLASSIFICATION_METRICS[0]


def _files_problem(train: Sequence[RawExample], path: Any) -> str:
    """Classification, unless every label is a number and some are not whole: then the file
    reads as scores and the user must say which it is."""
    numbers = [_number(label) for _, _, label in train]
    if train and all(n is not None for n in numbers) and any(not n.is_integer() for n in numbers):
        shown = ", ".join(repr(str(label)) for _, _, label in train[:3])
        raise ValueError(
            f"the labels of {path} are all numbers ({shown}, ...): to predict the score, add "
            "finetune.problem=regression; to treat each value as a class, add "
            "finetune.problem=classification"
        )
    return "classification"


def _number(label: Any) -> float | None:
    if isinstance(label, bool):
        return None
    try:
        value = float(label)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def with_scores(examples: list[RawExample], where: str) -> list[Example]:
    """``examples`` with their labels as numbers (a regression's scores)."""
    _check_not_empty(examples, where)
    scored = [Example(text, pair, _number(label)) for text, pair, label in examples]
    bad = [str(label) for (_, _, label), e in zip(examples, scored, strict=True) if e.label is None]
    if bad:
        raise ValueError(
            f"{where} has the label(s) {', '.join(map(repr, bad[:5]))}, which are not numbers: "
            "a regression predicts a score; fix the labels, or add "
            "finetune.problem=classification to treat them as classes"
        )
    return scored


def _check_not_empty(examples: list[RawExample], where: str) -> None:
    if not examples:
        raise ValueError(
            f"{where} holds no example; give it labelled text (or raise "
            "finetune.val_fraction / finetune.test_fraction when it is carved from train)"
        )


def _no_pairs(what: str) -> str:
    return (
        f"finetune.text_pair_column is set but {what} has no second text: drop "
        "finetune.text_pair_column"
    )


def builtin_examples() -> list[RawExample]:
    """(paragraph, None, topic) of the ``BUILTIN_TOPICS`` topics with the most paragraphs (ties
    by name), in corpus order."""
    from pydoc_data.topics import topics

    names = sorted(topics)
    paragraphs = {
        name: [
            p.strip() for p in _PARAGRAPH_BREAK.split(text) if len(p.strip()) >= BUILTIN_MIN_CHARS
        ]
        for name, text in zip(names, builtin_documents(), strict=True)
    }
    chosen = sorted(names, key=lambda name: (-len(paragraphs[name]), name))[:BUILTIN_TOPICS]
    return [(p, None, name) for name in names if name in chosen for p in paragraphs[name]]


def carve_missing(
    raw: dict[str, list[RawExample]], val_fraction: float, test_fraction: float, seed: int
) -> dict[str, list[RawExample]]:
    """Validation and test, where missing, carved from train by a seeded permutation; every
    split keeps its examples in source order."""
    import numpy as np

    train = raw["train"]
    order = np.random.default_rng(seed).permutation(len(train))
    fractions = {"validation": val_fraction, "test": test_fraction}
    splits = dict(raw)
    start = 0
    for split in (s for s in ("validation", "test") if s not in raw):
        count = math.ceil(fractions[split] * len(train))
        splits[split] = [train[i] for i in sorted(order[start : start + count].tolist())]
        start += count
    splits["train"] = [train[i] for i in sorted(order[start:].tolist())]
    return {split: splits[split] for split in SPLITS}


def label_names(train: Sequence[RawExample]) -> list[str]:
    """The classes: train's distinct labels as text, numbers sorted by value, then names."""
    if not train:
        raise ValueError("the train split holds no example; give the task labelled text")
    names = sorted({str(label) for _, _, label in train}, key=natural_key)
    if len(names) < 2:
        raise ValueError(
            f"every train example has the label {names[0]!r}: a classifier needs two classes "
            "at least; check finetune.label_column"
        )
    return names


def with_label_ids(
    examples: list[RawExample], names: list[str], where: str, classifier: str | None = None
) -> list[Example]:
    """``examples`` with their labels as ids of ``names`` (the classes). ``where`` names the
    examples in errors ("the test split"); ``classifier``: the fine-tuned checkpoint whose
    classes ``names`` are, when it scores them."""
    _check_not_empty(examples, where)
    ids = {name: i for i, name in enumerate(names)}
    unseen = sorted({str(label) for _, _, label in examples} - set(ids), key=natural_key)
    if unseen:
        shown, known = ", ".join(map(repr, unseen[:5])), ", ".join(map(repr, names[:10]))
        if classifier is not None:
            raise ValueError(
                f"{where} has the label(s) {shown} that {classifier} was not fine-tuned on "
                f"(its classes: {known}); score it on text labelled with its classes "
                "(finetune.label_column names the column)"
            )
        raise ValueError(
            f"{where} has the label(s) {shown} that no train example has (train's: {known}); "
            "a classifier cannot predict a class it never saw: fix the labels or add train "
            "examples"
        )
    return [Example(text, pair, ids[str(label)]) for text, pair, label in examples]


def files_examples(
    path: str | dict[str, str] | None, columns: Columns
) -> dict[str, list[RawExample]]:
    """The rows of ``finetune.path`` (one file: its train split; a mapping: each split's)."""
    if not path:
        raise ValueError(
            "finetune.task=files needs finetune.path=FILE (.csv, .jsonl or .parquet) or "
            "finetune.path={train: A, validation: B, test: C}"
        )
    paths = {"train": path} if isinstance(path, str) else dict(path)
    unknown = [k for k in paths if k not in SPLITS]
    if unknown or "train" not in paths:
        raise ValueError(
            f"finetune.path={paths} maps split names to files: use the keys "
            f"{', '.join(SPLITS)}, train required"
        )
    return {split: _read_file(Path(p), columns) for split, p in paths.items()}


def _read_file(path: Path, columns: Columns) -> list[RawExample]:
    """(text, pair, label) of each row of a .csv, .jsonl or .parquet file."""
    if path.suffix not in FILE_SUFFIXES:
        raise ValueError(
            f"finetune.path={path} is not a {', '.join(FILE_SUFFIXES)} file; labelled "
            "examples need columns (text, label)"
        )
    if not path.is_file():
        raise FileNotFoundError(f"finetune.path={path} does not exist")
    rows = _rows(path)
    have = list(rows[0]) if rows else []
    wanted = {"finetune.text_column": columns.text, "finetune.label_column": columns.label}
    if columns.pair is not None:
        wanted["finetune.text_pair_column"] = columns.pair
    absent = [f"{key}={name!r}" for key, name in wanted.items() if name not in have]
    if rows and absent:
        raise ValueError(
            f"{path} has no column {', '.join(absent)}; its columns are {have}: pass the "
            "column names as finetune.text_column=, finetune.label_column= (and "
            "finetune.text_pair_column= for pairs)"
        )
    return [
        (
            str(row[columns.text]),
            None if columns.pair is None else str(row[columns.pair]),
            row[columns.label],
        )
        for row in rows
    ]


def _rows(path: Path) -> list[dict[str, Any]]:
    import pandas as pd

    if path.suffix == ".parquet":
        return pd.read_parquet(path).to_dict("records")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise ValueError(
            f"{path} is not UTF-8 text: {err.reason} (byte {raw[err.start : err.end]!r} on "
            f"line {line}); save it as UTF-8, e.g. iconv -f latin1 -t utf-8 {path} > "
            f"{path.stem}.utf8{path.suffix}"
        ) from None
    if path.suffix == ".csv":
        return pd.read_csv(path, dtype=str, keep_default_na=False).to_dict("records")
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}, line {number}: not a JSON object ({err})") from None
    return rows


def _glue_folder(task: str, glue: GlueTask, folder: str) -> dict[str, list[RawExample]]:
    """A GLUE task from ``folder`` in GLUE's layout: its train and validation files (the
    Hub's splits, as ``load_dataset("nyu-mll/glue", task)[split].to_json(...)`` writes
    them); validation is the test here, as from the Hub."""
    columns = Columns(glue.text, glue.pair, "label")
    return {
        split: _read_file(glue_split_file(Path(folder), name, task), columns)
        for split, name in (("train", "train"), ("test", glue.validation))
    }


def glue_split_file(folder: Path, split: str, task: str) -> Path:
    """The one .csv/.jsonl/.parquet file of ``split`` in a GLUE-layout ``folder``."""
    if not folder.is_dir():
        raise FileNotFoundError(
            f"finetune.path={folder} for {task} is not a folder: give a folder in GLUE's "
            f"layout ({split}.jsonl beside train.jsonl)"
        )
    found = [folder / f"{split}{suffix}" for suffix in FILE_SUFFIXES]
    found = [path for path in found if path.is_file()]
    if len(found) != 1:
        have = sorted(p.name for p in folder.iterdir())
        raise FileNotFoundError(
            f"{folder} ({task}) needs one {split} file ({split}.jsonl, .csv or .parquet); "
            f"it has {have or 'nothing'}"
        )
    return found[0]


def glue_layout_columns(folder: Path, name: str) -> Columns:
    """The columns of a task of one's own in GLUE's layout: ``sentence`` (single texts) or
    ``sentence1`` and ``sentence2`` (pairs), and ``label``, read from its train file."""
    train = glue_split_file(folder, "train", name)
    rows = _rows(train)
    have = list(rows[0]) if rows else []
    if "label" in have and {"sentence1", "sentence2"} <= set(have):
        return Columns("sentence1", "sentence2", "label")
    if "label" in have and "sentence" in have:
        return Columns("sentence", None, "label")
    raise ValueError(
        f"{train} ({name}) has the columns {have}; GLUE's layout is sentence (or sentence1 "
        "and sentence2) and label"
    )


def glue_unavailable(tasks: Sequence[str]) -> tuple[str, list[str]] | None:
    """(why, the tasks it stops) when GLUE's ``tasks`` cannot all be read from the Hub or its
    cache; None when they can. Decided before any task is trained: an unreachable Hub in
    seconds, a missing cache entry per task (``HF_DATASETS_OFFLINE=1``) at once."""
    import datasets
    from datasets import load_dataset

    if not datasets.config.HF_HUB_OFFLINE and (why := hub_unavailable_reason()):
        return why, list(tasks)
    missing = []
    for task in tasks:
        try:
            load_dataset("nyu-mll/glue", task)
        except (ConnectionError, FileNotFoundError, ValueError):
            missing.append(task)
    return ("offline, and not in the Hugging Face cache", missing) if missing else None


def _glue_examples(task: str, glue: GlueTask, path: None = None) -> dict[str, list[RawExample]]:
    import datasets
    from datasets import load_dataset

    hint = (
        f"cannot load GLUE's {task}: the Hugging Face Hub is {{why}}. Download it elsewhere "
        f"into a folder in GLUE's layout (train.jsonl, {glue.validation}.jsonl) and pass it: "
        f"finetune.task={task} finetune.path=FOLDER; or, if it is already in the Hugging Face "
        "cache, set HF_DATASETS_OFFLINE=1 before starting."
    )
    if not datasets.config.HF_HUB_OFFLINE and (why := hub_unavailable_reason()):
        raise ConnectionError(hint.format(why=why))
    try:
        raw = load_dataset("nyu-mll/glue", task)
    except (ConnectionError, FileNotFoundError, ValueError) as err:
        raise ConnectionError(hint.format(why=f"not usable ({err})")) from None
    feature = raw["train"].features["label"]
    names = getattr(feature, "names", None)  # None: stsb's scores

    def examples(split: str) -> list[RawExample]:
        return [
            (
                row[glue.text],
                None if glue.pair is None else row[glue.pair],
                row["label"] if names is None else names[row["label"]],
            )
            for row in raw[split]
        ]

    return {"train": examples("train"), "test": examples(glue.validation)}
