"""What an Optuna search checks when its sweep starts, before its first trial (the core's
sweep callback calls ``sweep_start``: ``conf/features.py``)."""

from __future__ import annotations

import logging

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig

from conf.command_line import check_command_line
from features.optuna.trial import OPTUNA_SEARCH


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
    trial: each key searched or fixed on the command line, not both, and known keys in a
    search space written in a config file (``hydra.sweeper.params``); the search checks the
    rest itself."""
    sweeper = hydra.sweeper
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
