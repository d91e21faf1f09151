"""Sweeps (``python train.py -m ...``): the Hydra callback that checks them before their first
job and summarises them at the end.

How a job re-run in an existing sweep directory skips or resumes is the train mode's
(``modes/train.py``). This module stays free of heavy imports: Hydra builds the callback at
every start, single runs included.
"""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from conf.command_line import check_command_line
from conf.hydra_runtime import OPTUNA_SEARCH, parallel_jobs

if TYPE_CHECKING:  # the report's modules load matplotlib: only when a sweep ends
    from analysis.report import Report


class SweepSummary(Callback):
    """At the end of a multirun: summary.csv, summary.md and the figures at the sweep root."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            check_launcher(config.hydra.launcher)
            check_search(config.hydra)
        except ValueError as err:  # before any job starts: one line, no traceback
            print(f"tinylm: error: {err}", file=sys.stderr)
            raise SystemExit(1) from None
        sweep_dir = config.hydra.sweep.dir
        if config.hydra.sweeper.get("_target_") == OPTUNA_SEARCH:
            # Optuna imports alembic, which logs one INFO line per plugin it sets up.
            logging.getLogger("alembic").setLevel(logging.WARNING)
            hint = (
                f"its Optuna study is stored: if the search is interrupted, re-run the same "
                f"command with hydra.sweep.dir={sweep_dir} to go on from it"
            )
        else:
            hint = (
                f"if the sweep is interrupted, re-run the same command with "
                f"hydra.sweep.dir={sweep_dir}: finished runs are skipped, unfinished ones "
                "resume from their last checkpoint"
            )
        print(f"tinylm: sweep directory {sweep_dir}; {hint}")

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from modes.report import refresh  # matplotlib: when a sweep ends

        target = config.get("summary", {}).get("target_loss")
        report = write_summary(Path(config.hydra.sweep.dir), target_loss=target)
        refresh(Path(config.hydra.sweep.dir), target_loss=target, report=report)


def write_summary(sweep_dir: Path, target_loss: float | None = None) -> Report | None:
    """The sweep's summary files (``analysis/sweep_summary.py``), each named on stdout; the
    report they render, for its page (None: no run)."""
    from analysis.report import build_report  # matplotlib: when a sweep ends
    from analysis.sweep_summary import write_summary_files

    report = build_report(sweep_dir, target_loss)
    for path in write_summary_files(report) if report else []:
        print(f"tinylm: wrote {path}")
    return report


def check_launcher(launcher: DictConfig) -> None:
    """What a launcher needs, checked before it starts any job: a positive number of parallel
    jobs (joblib), ``sbatch`` on this machine (SLURM)."""
    parallel_jobs(launcher)
    if str(launcher.get("_target_", "")).endswith("SlurmLauncher") and not shutil.which("sbatch"):
        raise ValueError(
            "hydra/launcher=slurm submits jobs with sbatch, which is not on this machine: run "
            "the sweep on the cluster's login node, or here with hydra/launcher=submitit_local "
            "or hydra/launcher=joblib"
        )


def check_search(hydra: DictConfig) -> None:
    """What an Optuna search (``hydra/sweeper=optuna``; ``hydra`` is the multirun's Hydra
    config) needs before its first trial: each key searched or fixed on the command line, not
    both, and known keys in a search space written in a config file (``hydra.sweeper.params``;
    the command line's are ``conf.command_line``'s). Its storage, sampler, pruner and
    objectives are checked by the search itself (``hydra_plugins/tinylm_optuna.py``), also
    before its first trial."""
    sweeper = hydra.sweeper
    if sweeper.get("_target_") != OPTUNA_SEARCH:
        return
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
