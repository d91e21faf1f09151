"""What an Optuna search checks when its sweep starts, before its first trial (the core's
sweep callback calls ``sweep_start``: ``conf/features.py``)."""

from __future__ import annotations

import logging
from typing import get_type_hints

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, ListConfig

from analysis.run_record import SCORE_PREFIXES, RunRecord
from conf.command_line import check_command_line
from features.optuna.trial import OPTUNA_SEARCH
from models.config import closest

# Objective names that read a job's consumed compute (its record's "consumed").
CONSUMED = ("steps", "tokens", "flops", "seconds")
# The objectives that are validation losses: what a pruned trial reported on the way.
LOSSES = ("best_val_loss", "val_loss")
# Record fields that hold None when the run did not reach trainer.stop_at_loss.
TO_TARGET = ("seconds_to_target", "steps_to_target")
# What an objective may name (study.objective_values reads it): a field of the run record that
# holds one number, what the training consumed, or a fine-tune's score (SCORE_PREFIXES).
OBJECTIVES = (
    *(
        k
        for k, hint in get_type_hints(RunRecord).items()
        if hint in (int, float, float | None, int | None)
    ),
    *CONSUMED,
)
# The sweeper's counts, each a whole number from 1 (n_trials=0 would run no trial, n_jobs=0
# would ask for none and wait for ever): what each counts.
COUNTS = {
    "n_trials": "the number of trials the search finishes",
    "n_jobs": "the number of trials asked for at a time",
    "heartbeat_interval": "the seconds between a running trial's heartbeats",
    "grace_period": "the seconds a running trial may go without a heartbeat",
}


def sweep_start(config: DictConfig) -> str | None:
    """Checks an Optuna search's settings (ValueError: one line before any job) and says how it
    resumes; None for another sweeper."""
    if config.hydra.sweeper.get("_target_") != OPTUNA_SEARCH:
        return None
    check_search(config.hydra)
    # Optuna imports alembic, which logs one INFO line per plugin it sets up.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    return (
        f"its Optuna study is stored: if the search is interrupted, re-run the same command "
        f"with hydra.sweep.dir={config.hydra.sweep.dir} to go on from it"
    )


def check_search(hydra: DictConfig) -> None:
    """What an Optuna search (``hydra``: the multirun's Hydra config) needs before its first
    trial: its counts, objectives that jobs can record, each key searched or fixed on the
    command line, not both, and known keys in a search space written in a config file
    (``hydra.sweeper.params``); the search checks the rest itself."""
    sweeper = hydra.sweeper
    for key, what in COUNTS.items():
        value = sweeper.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"hydra.sweeper.{key}={value}: give {what}, a whole number from 1")
    _check_objectives(sweeper.get("objectives"))
    _check_searched_once(list(hydra.get("overrides", {}).get("task", [])))
    params = sweeper.get("params") or {}
    sources = hydra.get("runtime", {}).get("config_sources", [])
    config_dirs = [s.path for s in sources if s.provider == "command-line" and s.schema == "file"]
    try:
        check_command_line(
            [
                *(f"--config-dir={d}" for d in config_dirs[:1]),
                *(f"{k}={v}" for k, v in params.items()),
            ]
        )
    except ValueError as err:
        raise ValueError(f"hydra.sweeper.params: {err}") from None


def _check_objectives(objectives: object) -> None:
    """Each objective one that a job's record can hold (``OBJECTIVES``); whether the jobs of
    this search do record it is known after the first trial."""
    if not isinstance(objectives, ListConfig):
        raise ValueError(
            f"hydra.sweeper.objectives={objectives} is not a list: give "
            f"hydra.sweeper.objectives=[{objectives}]"
        )
    for name in objectives:
        if name not in OBJECTIVES and not str(name).startswith(SCORE_PREFIXES):
            hint = closest(str(name), OBJECTIVES)
            guess = f" (did you mean {hint}?)" if hint else ""
            raise ValueError(
                f"hydra.sweeper.objectives: {name} is not a number that a job records{guess}; "
                f"give some of: {', '.join(OBJECTIVES)}, or a fine-tune's score (val_NAME, "
                "test_NAME)"
            )


def _check_searched_once(overrides: list[str]) -> None:
    """A key given both a single value and a range on the command line is refused: which of
    the two was meant cannot be told."""
    parsed = OverridesParser.create().parse_overrides(overrides)
    searched = {o.key_or_group: o.input_line for o in parsed if o.is_sweep_override()}
    for override in parsed:
        if not override.is_sweep_override() and override.key_or_group in searched:
            raise ValueError(
                f"{override.input_line} and {searched[override.key_or_group]}: the search "
                f"would keep the single value and not search {override.key_or_group}; give "
                "the key once, its value or its range"
            )
