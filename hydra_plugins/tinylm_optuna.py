"""``hydra/sweeper=optuna`` under tinylm: the Optuna plugin's sweeper, which tells Optuna each
job's ``best_val_loss`` (``train.execute`` returns it; None, a failed trial, for a failed job).

Hydra instantiates sweepers only from the ``hydra_plugins`` package and refuses a config file
named like the plugin's own schema, so this module lives here (``hydra_plugins`` is a namespace
package: the checkout's joins the installed plugins'), and ``modes.sweep.SweepSummary`` points
the plugin's config at ``OptunaSearch`` when the multirun starts. ``OptunaSearch`` runs the
plugin's sweeper unchanged and answers its one crash: when every trial failed, the plugin's
``study.best_trial`` raises at the end; here the summary is still written and the error is one
line. The plugin is imported when the sweeper is built, so this module loads without it (Hydra
imports every ``hydra_plugins`` module at each start).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf


class OptunaSearch(Sweeper):
    """The Optuna plugin's sweeper with tinylm's end of a search in which every trial failed."""

    def __init__(self, **settings: Any) -> None:
        from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper

        self.search = OptunaSweeper(**settings)
        self.config: DictConfig | None = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config = config
        self.search.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: list[str]) -> Any:
        assert self.config is not None, "setup() comes first"
        sweep_dir = Path(self.config.hydra.sweep.dir)
        # As Hydra's basic sweeper does: the jobs (conf.hydra_runtime.swept_keys) and the
        # summary read the sweep's settings there.
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        try:
            return self.search.sweep(arguments)
        except ValueError:
            from analysis.records import collect_runs

            runs = collect_runs(sweep_dir)
            if not runs or any(run.get("status") == "completed" for run in runs):
                raise  # not the search without a completed trial
        from modes.sweep import write_summary

        write_summary(sweep_dir)
        print(
            f"tinylm: error: all {len(runs)} trials of the Optuna search failed, so it has no "
            f"best trial; each trial's error is in {sweep_dir / 'summary.md'}",
            file=sys.stderr,
        )
        raise SystemExit(1)
