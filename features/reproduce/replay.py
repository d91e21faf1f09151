"""A record's command, rebuilt for a re-run. A record may come from someone else: it is data,
never code, so only plain ``key=value`` settings of tinylm's own groups are replayed; Hydra's
settings (callbacks, launchers, sweepers), ``_target_`` keys, interpolations and sweeps are
refused before anything runs, and every value goes through the schema in the re-run itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import OverrideParseException

from analysis.run_record import record_path
from conf.command_line import check_command_line

# The modes whose runs write a run record: the only ones a record can ask to re-run.
RECORDED_MODES = ("train", "finetune")
# Where the run wrote its files: the re-run gets its own.
NOT_REPLAYED = ("output_dir",)
_PLAIN_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*")


def replayed_overrides(record: Mapping[str, Any], run_dir: Path) -> dict[str, str]:
    """The record's overrides that the re-run gives again, each checked; a ValueError names
    the first that cannot be replayed and why, before any of them runs."""
    where = record_path(run_dir)
    overrides = record.get("overrides")
    if not isinstance(overrides, dict):
        raise ValueError(f"{where} records no command to re-run (no overrides)")
    replayed = {}
    for key, value in overrides.items():
        if not isinstance(value, str):
            raise ValueError(f"{where} records {key}={value!r}, not a command-line value")
        problem = _unsafe(key, value)
        if problem:
            raise ValueError(
                f"{where} asks to replay {key}={value}, which {problem}; a record is data, "
                "never code: mode=reproduce replays only plain settings of tinylm's groups"
            )
        if key not in NOT_REPLAYED:
            replayed[key] = value
    if "mode" in record:  # a fine-tune's record names its mode, whatever its overrides say
        replayed.setdefault("mode", str(record["mode"]))
    mode = replayed.get("mode", "train")
    if mode not in RECORDED_MODES:
        raise ValueError(
            f"{where} is a mode={mode} record; mode=reproduce re-runs the runs of "
            f"{' and '.join(f'mode={m}' for m in RECORDED_MODES)}"
        )
    try:
        check_command_line([f"{key}={value}" for key, value in replayed.items()])
    except ValueError as err:
        raise ValueError(f"{where} cannot be replayed by this checkout: {err}") from None
    if isinstance(record.get("seed"), int):  # the seed it ran with, whatever today's default
        replayed["seed"] = str(record["seed"])
    if mode == "finetune":
        _one_fine_tune(record, replayed, where)
    return replayed


def _one_fine_tune(record: Mapping[str, Any], replayed: dict[str, str], where: Path) -> None:
    """A fine-tune re-runs from the checkpoint it fine-tuned (one job's, when its command
    fine-tuned a sweep's); the task of a suite is not re-run alone."""
    task = replayed.get("finetune.task", "builtin")
    if record.get("task") != task:
        raise ValueError(
            f"{where} is the {record.get('task')} task of the suite finetune.task={task}; "
            "re-run the suite's command, or fine-tune that task alone"
        )
    pretrained = Path(str(record.get("pretrained")))
    if not pretrained.is_file():
        raise FileNotFoundError(
            f"{where} fine-tuned {pretrained}, which no longer exists: a fine-tune re-runs from "
            "the checkpoint it fine-tuned"
        )
    replayed["ckpt_path"] = str(pretrained)


def _unsafe(key: str, value: str) -> str | None:
    """Why ``key=value`` from a record is not replayed, or None."""
    if not _PLAIN_KEY.fullmatch(key):
        return "is no plain key of a config group"
    if key.split(".")[0] == "hydra":
        return "is a Hydra setting (callbacks, launcher, sweeper, run directory)"
    if "_target_" in key or "_target_" in value:
        return "names a _target_ (an object Hydra would build)"
    if "${" in value:
        return "is an interpolation (resolved at run time)"
    try:
        (override,) = OverridesParser.create().parse_overrides([f"{key}={value}"])
    except OverrideParseException:
        return "is not a valid override"
    if override.is_sweep_override():
        return "is a sweep over several values, not one value"
    return None
