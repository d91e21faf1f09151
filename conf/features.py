"""Features: each folder of ``features/`` is one, found at run time, never listed.

A feature folder's ``__init__.py`` defines ``FEATURE = Feature(...)``: the modes it adds, its
config groups, the checkpoints it writes and what the core's commands do with them, and the
Hydra plugins it brings. The core asks this module and imports no feature by name, so deleting
a feature's folder (and its tests' folder) is its whole removal (ARCHITECTURE.md, "Features").
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

FEATURES_DIR = Path(__file__).resolve().parent.parent / "features"


@dataclass(frozen=True)
class Feature:
    """What one feature adds to the core. Hooks are ``"module:function"`` strings, imported
    only when called, so finding the features costs no feature's heavy imports.

    modes: ``mode=NAME`` -> the module whose ``run(settings, callbacks)`` runs it.
    groups: config group -> the dataclass that validates it (its field defaults are the
        group's defaults: no YAML to keep in step).
    checkpoint_key: the ``hyper_parameters`` key that marks the checkpoints it writes.
    checkpoint_modes: a core mode (eval, generate, export) -> the hook that takes such a
        checkpoint over, ``(settings, checkpoints, first, callbacks) -> dict``; ``first`` is the
        first checkpoint's contents, already read. Other modes refuse the checkpoint with
        ``describe_checkpoint``'s line, ``(path, hparams, mode) -> str``.
    conf_dir: a folder of Hydra config groups (the search's ``hydra/sweeper/optuna.yaml``)
        that Hydra searches besides ``conf/`` (``hydra_plugins/tinylm_features.py``).
    hydra_plugins: ``"module:Class"`` Hydra plugins (a sweeper) for Hydra to find.
    sweep_start: ``(config) -> str | None``, called when a multirun starts (``modes/sweep.py``):
        checks the feature's sweep settings (a ValueError stops the sweep in one line) and
        returns how the sweep resumes when it is the feature's (its sweeper), else None.
    scoring: ``(settings, task, datamodule, text) -> dict``: called by ``mode=eval`` before it
        scores text with a language model's ``task`` (the feature may change the network, as
        the heads' ``heads.prune`` gates heads off); the fields it returns join the record.
    eval_fields: the record fields ``scoring`` may add: they tell evaluations apart in
        ``eval.jsonl`` and are shown in its table when present.
    training_callbacks: ``(settings) -> list`` of extra Lightning callbacks for the modes that
        train (``training.trainer.training_trainer``).
    list_keys: keys whose command-line value is a comma-separated list, as the tool behind
        them takes it (``KEY=A,B``): ``train.py`` hands it to Hydra as its list
        ``KEY=[A,B]``, which Hydra would otherwise read as a sweep (``comma_lists``); a value
        already quoted or bracketed is left as it is.
    moved_keys: keys of the core's groups that this feature took over (``eval.KEY``) -> what
        replaces them, named when a command still gives one (``conf/command_line.py``); with
        the feature deleted they are plain unknown keys.
    report: ``(report) -> None``, called by ``analysis.report.build_report`` on the report of
        a sweep or run directory before its tables and figures are drawn: adds the feature's
        columns, summary sections and sentences, figures and run files, read from the files
        its commands wrote (the fields of ``analysis.report.Report``).
    data_stream: the module that reads the source as a stream when ``data.streaming=true``
        (``data/datamodule.py``): ``prepare_stream(cfg, arch, tokenizer_json, whole)``, the
        ``Prepared`` evaluation splits and tokenizer, and ``stream_loader(cfg, tokenizer, arch,
        max_seq_len, collate)``, the train loader.
    pages: ``(report) -> Path``, called by ``modes.report.refresh`` whenever a run or sweep
        directory's report changes (a run or sweep ended, a command added records): renders
        the built ``analysis.report.Report`` as a page in its directory, the file returned.
    fresh_modes: its modes that start from no checkpoint, as ``mode=train`` does (the μP
        coordinate check trains fresh networks): ``conf.training_config.JobConfig`` asks
        every other mode for ``ckpt_path``.
    """

    name: str
    modes: Mapping[str, str] = field(default_factory=dict)
    groups: Mapping[str, type] = field(default_factory=dict)
    checkpoint_key: str | None = None
    checkpoint_modes: Mapping[str, str] = field(default_factory=dict)
    describe_checkpoint: str | None = None
    conf_dir: Path | None = None
    hydra_plugins: tuple[str, ...] = ()
    sweep_start: str | None = None
    scoring: str | None = None
    eval_fields: tuple[str, ...] = ()
    training_callbacks: str | None = None
    list_keys: tuple[str, ...] = ()
    moved_keys: Mapping[str, str] = field(default_factory=dict)
    report: str | None = None
    data_stream: str | None = None
    pages: str | None = None
    fresh_modes: tuple[str, ...] = ()


@functools.cache
def features() -> tuple[Feature, ...]:
    """Every feature under ``features/``, in name order."""
    if not FEATURES_DIR.is_dir():
        return ()
    found = []
    for folder in sorted(FEATURES_DIR.iterdir()):
        if (folder / "__init__.py").is_file():
            found.append(importlib.import_module(f"features.{folder.name}").FEATURE)
    return tuple(found)


def hook(target: str) -> Callable[..., Any]:
    """The function (or class) a ``"module:name"`` string names."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def hooks(field: str) -> list[Callable[..., Any]]:
    """The functions that the features' ``field`` hooks name (``Feature.report``, ...), in
    feature order; the features without one are left out."""
    return [hook(getattr(f, field)) for f in features() if getattr(f, field)]


def feature_modes() -> dict[str, str]:
    """Every feature's modes: mode -> module."""
    return {mode: module for f in features() for mode, module in f.modes.items()}


def fresh_modes() -> tuple[str, ...]:
    """Every feature's modes that need no checkpoint (``Feature.fresh_modes``)."""
    return tuple(mode for f in features() for mode in f.fresh_modes)


def feature_groups() -> dict[str, type]:
    """Every feature's config groups: group -> dataclass."""
    return {group: cls for f in features() for group, cls in f.groups.items()}


def moved_keys(group: str) -> dict[str, str]:
    """The keys of ``group`` that features took over: key -> what replaces it."""
    prefix = f"{group}."
    return {
        key.removeprefix(prefix): new
        for f in features()
        for key, new in f.moved_keys.items()
        if key.startswith(prefix)
    }


def comma_lists(args: Sequence[str]) -> list[str]:
    """Command-line arguments with each feature's ``list_keys`` given as ``KEY=A,B`` rewritten
    as Hydra's list ``KEY=[A,B]``: as typed, Hydra reads the commas as a sweep and refuses a
    single run. A value already quoted or bracketed is left to Hydra."""
    keys = tuple(f"{key}=" for f in features() for key in f.list_keys)
    rewritten = []
    for arg in args:
        key = next((k for k in keys if arg.startswith(k)), None)
        value = arg.removeprefix(key) if key else ""
        listed = "," in value and value[:1] not in "[\"'"
        rewritten.append(f"{key}[{value}]" if listed else arg)
    return rewritten


def checkpoint_owner(hparams: Mapping[str, Any]) -> Feature | None:
    """The feature that wrote a checkpoint with these hyper-parameters, if one did."""
    return next((f for f in features() if f.checkpoint_key in hparams), None)


def checkpoint_handler(hparams: Mapping[str, Any], mode: str) -> Callable[..., Any] | None:
    """The hook of the feature that wrote a checkpoint with these hyper-parameters, for
    ``mode``; None for a language model or a mode the feature does not take over."""
    owner = checkpoint_owner(hparams)
    target = owner.checkpoint_modes.get(mode) if owner is not None else None
    return hook(target) if target else None


def is_language_model(hparams: Mapping[str, Any]) -> bool:
    """Whether a checkpoint is a pretrained language model's (the training task's: it records
    its data), rather than one a feature wrote."""
    return "data_config" in hparams and checkpoint_owner(hparams) is None


def training_callbacks(settings: Any) -> list[Any]:
    """The extra Lightning callbacks the features add to the modes that train."""
    return [callback for made in hooks("training_callbacks") for callback in made(settings)]


def eval_fields() -> tuple[str, ...]:
    """Every feature's evaluation record fields (``Feature.eval_fields``)."""
    return tuple(name for f in features() for name in f.eval_fields)


def scoring_fields(settings: Any, task: Any, datamodule: Any, text: Any) -> dict[str, Any]:
    """What the features' ``scoring`` hooks add to an evaluation record."""
    added = [score(settings, task, datamodule, text) for score in hooks("scoring")]
    return {key: value for fields in added for key, value in fields.items()}


def data_stream() -> ModuleType | None:
    """The module of the feature that streams data (``Feature.data_stream``), if one does."""
    target = next((f.data_stream for f in features() if f.data_stream), None)
    return importlib.import_module(target) if target else None


def pages() -> list[Callable[[Any], Path]]:
    """The features' ``pages`` hooks: each renders a built report as the file it returns."""
    return hooks("pages")
