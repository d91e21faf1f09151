"""EleutherAI's lm-evaluation-harness (``lm-eval``) on a tinylm decoder, in memory: the
checkpoint becomes its Hugging Face model and fast tokenizer (``training.hf_export``), and the
harness's own ``HFLM`` scores it, as ``lm-eval --model hf`` would a Hub model. A document
follows an EOS, so the tokenizer's BOS is its EOS. ``lm-eval`` is an optional dependency,
imported only inside these functions.
"""

from __future__ import annotations

import difflib
import fnmatch
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from common.library_private import dataset_file_builders
from data.hub import hub_unavailable_reason
from data.tokenizer import tokenizer_from_json
from features.harness.config import HarnessConfig
from training.checkpoint import LoadedCheckpoint
from training.hf_families import hf_family

INSTALL = 'pip install -e ".[eval]"'
# The harness's task kinds (lm_eval.tasks._index.Kind names).
_TASK_KINDS = ("TASK", "PY_TASK")


def require_harness() -> Any:
    """The ``lm_eval`` module, with what its Hugging Face model needs, or a one-line error
    that says how to install them."""
    try:
        import lm_eval
        import lm_eval.models.huggingface  # noqa: F401  (imports transformers and accelerate)
    except ImportError as err:
        missing = err.name or "lm-eval"
        raise ValueError(
            f"mode=harness needs EleutherAI's lm-evaluation-harness with Hugging Face "
            f"transformers ({missing} is not installed): {INSTALL}"
        ) from None
    return lm_eval


def check_harness_checkpoint(loaded: LoadedCheckpoint) -> None:
    """Only a decoder the Hugging Face families reproduce exactly is scored."""
    cfg = loaded.config
    if cfg.arch != "decoder":
        raise ValueError(
            f"{loaded.path} is an {cfg.arch}: mode=harness scores next-token "
            "log-likelihoods, which a masked language model does not give. Score an encoder "
            "with mode=pairs (minimal pairs), or fine-tune it on the task (mode=finetune)"
        )
    hf_family(cfg).check(
        cfg,
        remedy="mode=harness scores that Hugging Face model; mode=eval scores this checkpoint "
        "on text",
    )


def task_manager(names: Sequence[str], include: str | None) -> tuple[Any, list[str]]:
    """The harness's task index and the task names (wildcards expanded) it will load; unknown
    names refused. With ``include``, the directory's tasks are indexed alone first
    (milliseconds), the harness's own ~15,000 (seconds) only when a name is not there."""
    if include is not None:
        check_include(include)
    require_harness()
    from lm_eval.tasks import TaskManager

    if include is not None:
        own = TaskManager(include_path=include, include_defaults=False)
        expanded = _expand(own, names)
        if not _unknown(own, expanded):
            return own, expanded
    manager = TaskManager(include_path=include)
    expanded = _expand(manager, names)
    unknown = _unknown(manager, expanded)
    if unknown:
        raise ValueError(_unknown_tasks_message(manager, unknown, include))
    return manager, expanded


def check_include(include: str) -> None:
    folder = Path(include)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"harness.include={include} is not a directory; pass a directory of task "
            "YAML files (lm-eval --include_path)"
        )
    if not any(folder.rglob("*.yaml")):
        raise ValueError(
            f"harness.include={include} holds no task YAML (*.yaml, in it or below); "
            "write one per task (task:, dataset_path:, output_type:, doc_to_text:, ...) or "
            "pass the directory that holds them"
        )


def check_hub_reachable(manager: Any, names: Sequence[str]) -> None:
    """A task that reads a Hub dataset fails now, in one line, if the Hub is unreachable and
    ``datasets`` is not in offline mode (which reads its cache, or fails at once)."""
    import datasets

    if datasets.config.HF_HUB_OFFLINE:
        return
    needs = {name: hub for name in names if (hub := sorted(set(_hub_datasets(manager, name))))}
    if needs and (why := hub_unavailable_reason()):
        raise ConnectionError(_offline_message(needs, f"the Hugging Face Hub is {why}"))


def harness_model(loaded: LoadedCheckpoint, batch_size: int) -> Any:
    """The harness's ``HFLM`` around the checkpoint's in-memory Hugging Face model (CPU)."""
    require_harness()
    from lm_eval.models.huggingface import HFLM

    from training.hf_export import hf_tokenizer, to_hf_model

    tokenizer = tokenizer_from_json(loaded.hparams["tokenizer_json"])
    model = to_hf_model(loaded.model, tokenizer)
    # HFLM warns that an instantiated model ignores its loading arguments: we pass none.
    logger = logging.getLogger("lm_eval.models.huggingface")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        return HFLM(
            pretrained=model,
            tokenizer=hf_tokenizer(tokenizer, loaded.config),  # BOS = EOS: the prefix token
            max_length=loaded.config.max_seq_len,
            batch_size=batch_size,
            device="cpu",
        )
    finally:
        logger.setLevel(level)


def run_harness(
    loaded: LoadedCheckpoint,
    manager: Any,
    names: Sequence[str],
    cfg: HarnessConfig,
    log_samples: bool = False,
) -> dict[str, Any]:
    """``lm_eval.simple_evaluate`` of the checkpoint on ``names``: the harness's results."""
    from lm_eval import evaluator

    lm = harness_model(loaded, cfg.batch_size)
    limit = cfg.limit
    try:
        return evaluator.simple_evaluate(
            model=lm,
            tasks=list(names),
            task_manager=manager,
            num_fewshot=cfg.num_fewshot,
            limit=int(limit) if limit is not None and limit >= 1 else limit,
            batch_size=cfg.batch_size,
            log_samples=log_samples,
        )
    except ConnectionError as err:  # a Hub dataset that offline mode cannot find in the cache
        raise ConnectionError(_offline_message({", ".join(names): []}, str(err))) from None


def metric_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per task (or group) and metric of the harness's results."""
    versions, shots = results.get("versions", {}), results.get("n-shot", {})
    better = results.get("higher_is_better", {})
    rows = []
    for task, values in {**results["results"], **results.get("groups", {})}.items():
        n, n_total = _counts(results, task)
        for key, value in values.items():
            metric, _, filter_name = key.partition(",")
            if not filter_name or metric.endswith("_stderr") or not _is_number(value):
                continue  # alias, name, sample_len; the stderr goes with its metric
            stderr = values.get(f"{metric}_stderr,{filter_name}")
            rows.append(
                {
                    "task": task,
                    "task_version": versions.get(task),
                    "num_fewshot": shots.get(task),
                    "n": n,
                    "n_total": n_total,
                    "metric": metric,
                    "filter": filter_name,
                    "value": float(value),
                    "stderr": float(stderr) if _is_number(stderr) else None,
                    "higher_is_better": better.get(task, {}).get(metric),
                }
            )
    return rows


def _counts(results: dict[str, Any], task: str) -> tuple[int | None, int | None]:
    """(examples scored, examples in the task); a group's are its tasks' sums."""
    own = results.get("n-samples", {}).get(task)
    if own is not None:
        return own["effective"], own["original"]
    parts = [_counts(results, sub) for sub in results.get("group_subtasks", {}).get(task, [])]
    if not parts or any(n is None for pair in parts for n in pair):
        return None, None
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _expand(manager: Any, names: Sequence[str]) -> list[str]:
    """Names with wildcards (``mmlu_*``) as the task names they match, as lm-eval's command
    line does; a pattern that matches nothing stays, to be named as unknown."""
    expanded: list[str] = []
    for name in names:
        matched = fnmatch.filter(manager.all_tasks, name) if _is_pattern(name) else []
        expanded.extend(matched or [name])
    return list(dict.fromkeys(expanded))


def _is_pattern(name: str) -> bool:
    return any(c in name for c in "*?[")


def _unknown(manager: Any, names: Sequence[str]) -> list[str]:
    """The names, and those their groups and tags hold, that the index lacks."""
    missing: list[str] = []
    for name in names:
        if not name.endswith((".yaml", ".yml")):
            missing.extend(n for n, cfg in _members(manager, name) if cfg is None)
    return list(dict.fromkeys(missing))


def _members(
    manager: Any, name: str, seen: frozenset[str] = frozenset()
) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """(task name, its YAML config or None when the index lacks it) for every task below
    ``name`` (a task, group or tag)."""
    entry = manager.task_index.get(name)
    if entry is None:
        yield name, None
        return
    if name in seen:
        return
    seen = seen | {name}
    kind = entry.kind.name
    if kind in _TASK_KINDS:
        yield name, entry.cfg or {}
    elif kind == "TAG":
        for member in sorted(entry.tags):
            yield from _members(manager, member, seen)
    elif kind == "GROUP":
        yield from _group_members(manager, (entry.cfg or {}).get("task"), seen)


def _group_members(
    manager: Any, items: Any, seen: frozenset[str]
) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """``_members`` of a group's ``task:`` list: names, inline task configs and groups."""
    for item in items if isinstance(items, list) else [items]:
        sub = item.get("task") if isinstance(item, dict) else item
        if isinstance(sub, list):
            yield from _group_members(manager, sub, seen)
        elif isinstance(item, dict) and sub not in manager.task_index:
            # Equivalent mutants: no caller reads an inline config's name.
            yield str(sub), item  # pragma: no mutate
        elif isinstance(sub, str):
            yield from _members(manager, sub, seen)


def _hub_datasets(manager: Any, name: str) -> Iterator[str]:
    """The Hub datasets the tasks below ``name`` read: a ``dataset_path`` that is neither a
    file builder of ``datasets`` (json, csv, ...) nor a local path, without ``custom_dataset``."""
    if name.endswith((".yaml", ".yml")):
        return
    builders = dataset_file_builders()
    for _, cfg in _members(manager, name):
        path = (cfg or {}).get("dataset_path")
        if not isinstance(path, str) or "custom_dataset" in cfg:
            continue
        if path not in builders and not Path(path).exists():
            yield path


def _unknown_tasks_message(manager: Any, unknown: Sequence[str], include: str | None) -> str:
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name, manager.all_tasks, n=3)
        parts.append(f"{name} (did you mean {' or '.join(close)}?)" if close else name)
    where = f" or in harness.include={include}" if include else ""
    return (
        f"harness.tasks: unknown harness task(s) {', '.join(parts)}: not among the "
        f"{len(manager.all_tasks)} tasks, groups and tags lm-eval lists{where} "
        "(`lm-eval ls tasks` prints them)"
    )


def _offline_message(needs: dict[str, list[str]], why: str) -> str:
    tasks = "; ".join(
        f"{task} reads {', '.join(hub)}" if hub else task for task, hub in needs.items()
    )
    return (
        f"mode=harness cannot load its data ({tasks}): {why}. Run it once with the network "
        "(the datasets cache keeps the data; later runs may set HF_DATASETS_OFFLINE=1), or "
        "use local data: a task YAML with dataset_path: json and dataset_kwargs: "
        "{data_files: ...} in harness.include=DIR"
    )
