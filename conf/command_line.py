"""The command line's keys and group choices, checked before Hydra composes anything.

Hydra answers a mistyped key (``model.num_head=4``) with advice to add ``+``, and a mistyped
group choice (``model=gtp``) with its search path; here both get one line with a did-you-mean
before any data is read or any job of a sweep starts. Values are left to the dataclasses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Glob, Override
from hydra.errors import OverrideParseException

from common.library_private import hydra_argument_parser
from conf.features import features, moved_keys
from conf.schema import JobConfig, all_groups
from models.config import check_names, closest

CONF = Path(__file__).resolve().parent
SEARCH_SPACE = "hydra.sweeper.params."  # the Optuna sweeper's search space in its config
# A sweeper's samplers (the Optuna search's): conf/hydra/sweeper/sampler/ of a config folder.
SAMPLER = "hydra/sweeper/sampler"


def check_command_line(argv: Sequence[str]) -> None:
    """Raise ValueError for the first unknown group choice in ``argv`` (``train.py``'s
    arguments, Hydra's flags included), else for the unknown keys of the first scope (a group,
    or the top level) that has any, in command-line order."""
    args = hydra_argument_parser().parse_args(argv)  # hydra.main's: flags split as there
    if args.shell_completion or args.experimental_rerun:
        return  # their words are not overrides of this config
    try:
        overrides = OverridesParser.create().parse_overrides(args.overrides)
    except OverrideParseException:
        return  # a syntax error: Hydra's message points at it
    # --config-path swaps the primary config directory: its groups are not known here.
    choices = {} if args.config_path else group_choices([CONF, *_extra_dirs(args.config_dir)])
    known = all_groups()
    groups = tuple(sorted({*known, *choices}))
    top_level = (*_field_names(JobConfig), *groups)
    keys: dict[tuple[str, tuple[str, ...]], list[str]] = {}  # (prefix, valid keys) -> keys
    retired: dict[str, dict[str, str]] = {}  # prefix -> the group's retired keys
    search_space = []  # hydra.sweeper.params.KEY=...: Optuna's search space, KEY checked here
    for override in overrides:
        key, shown = override.key_or_group, ""
        if key.startswith(SEARCH_SPACE):
            key, shown = key.removeprefix(SEARCH_SPACE), SEARCH_SPACE
            search_space.append((key, override))
        elif key == SAMPLER:
            dirs = [CONF, *(f.conf_dir for f in features() if f.conf_dir is not None)]
            samplers = sorted(p.stem for d in dirs for p in (d / SAMPLER).glob("*.yaml"))
            for choice in _chosen(override):
                _check_choice(key, choice, samplers)
            continue
        elif override.is_hydra_override() or key == "hydra" or override.package:
            continue
        head, _, rest = key.partition(".")
        if not rest and head in choices:
            for choice in _chosen(override):
                _check_choice(head, choice, choices[head])
        elif rest and head in known:
            name, _, below = rest.partition(".")  # data.path.train: path
            scope = (f"{shown}{head}.", _field_names(known[head]))
            retired[scope[0]] = {**getattr(known[head], "RETIRED_KEYS", {}), **moved_keys(head)}
            keys.setdefault(scope, []).append(name)
            nested = getattr(known[head], "NESTED", {}).get(name)
            if nested is not None and below:  # trainer.budget.flops: flops, a BudgetConfig's
                nested_scope = (f"{shown}{head}.{name}.", _field_names(nested))
                keys.setdefault(nested_scope, []).append(below.split(".")[0])
        elif not rest:
            keys.setdefault((shown, top_level), []).append(head)
        elif head not in top_level:
            # Only a group has keys below it: modle.num_heads meant a group, not mode.
            keys.setdefault((shown, groups), []).append(head)
    for (prefix, valid), names in keys.items():
        check_names(names, valid, prefix, retired.get(prefix))
    for key, override in search_space:
        raise ValueError(
            f"{SEARCH_SPACE}{key} cannot be set on the command line (Hydra sweeps none of its "
            f"own keys): give the search space as {key}={value_text(override)}, which "
            "hydra/sweeper=optuna searches, or as hydra.sweeper.params in a config file"
        )


def group_choices(config_dirs: Sequence[Path]) -> dict[str, list[str]]:
    """Each config group of ``config_dirs`` (a folder of YAML files, Hydra's own excepted) ->
    its choices, the files' paths without ``.yaml``."""
    found: dict[str, set[str]] = {}
    for root in config_dirs:
        for group in (p for p in root.iterdir() if p.is_dir() and p.name != "hydra"):
            names = {str(f.relative_to(group).with_suffix("")) for f in group.rglob("*.yaml")}
            if names:
                found.setdefault(group.name, set()).update(names)
    return {group: sorted(names) for group, names in found.items()}


def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _extra_dirs(config_dir: str | None) -> list[Path]:
    """``--config-dir``'s folder, which Hydra searches besides ``conf/``."""
    return [Path(config_dir)] if config_dir and Path(config_dir).is_dir() else []


def _chosen(override: Override) -> Iterator[str]:
    """The choices a group override names: one, or each of a sweep's list. Globs, ranges and
    ``null`` name no file of their own: Hydra resolves them."""
    value = override.value()
    if isinstance(value, str):
        yield value
    elif override.is_choice_sweep() and not isinstance(value, Glob):
        yield from override.sweep_string_iterator()


def value_text(override: Override) -> str:
    """The override's value as typed, without the quotes around all of it."""
    text = (override.input_line or "").partition("=")[2]
    quoted = len(text) > 1 and text[0] == text[-1] and text[0] in "'\""
    return text[1:-1] if quoted else text


def _check_choice(group: str, choice: str, valid: list[str]) -> None:
    if choice in valid:
        return
    hint = closest(choice, valid)
    guess = f" (did you mean {group}={hint}?)" if hint else ""
    raise ValueError(
        f"{group}={choice} is unknown{guess}; choose one of: {', '.join(valid)} "
        f"(conf/{group}/*.yaml)"
    )
