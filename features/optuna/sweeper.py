"""``hydra/sweeper=optuna``: tinylm's Optuna search, on Optuna's ask/tell API (README.md).

Each trial is one job of the launcher, run in ``SWEEP/N`` for trial number N, and its record
decides the trial: completed (the ``objectives`` it records), pruned, or failed. The study lives
in a storage, so a search re-run goes on from it and several workers share it: Optuna numbers
the trials across the study, so no two run in one directory. Hydra imports every
``hydra_plugins`` module at each start, so the search itself (``search.py``, Optuna) is
imported only when a search runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf


class OptunaSearch(Sweeper):
    """Hydra's sweeper of ``hydra/sweeper=optuna`` (``conf/hydra/sweeper/optuna.yaml`` here)."""

    def __init__(self, **settings: Any) -> None:
        self.settings = settings
        self.config: DictConfig | None = None
        self.launcher: Any = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> None:
        assert self.config is not None, "setup() comes first"
        sweep_dir = Path(self.config.hydra.sweep.dir)
        # As Hydra's basic sweeper does: the jobs (conf.hydra_runtime.swept_keys) and the
        # summary read the sweep's settings there.
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        from features.optuna.search import SearchWorker  # Optuna: only when a search runs

        try:
            search = SearchWorker(self.settings, self.config.hydra.sweeper, arguments, sweep_dir)
            search.run(self.launcher)
        except ValueError as err:
            print(f"tinylm: error: {err}", file=sys.stderr)
            raise SystemExit(1) from None
        if search.completed == 0:
            from modes.sweep import write_summary

            write_summary(sweep_dir)
            print(
                f"tinylm: error: all {search.finished} trials of the Optuna search failed, so "
                f"it has no best trial; each trial's error is in {sweep_dir / 'summary.md'}",
                file=sys.stderr,
            )
            raise SystemExit(1)
