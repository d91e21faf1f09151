"""The Optuna search: ``hydra/sweeper=optuna``, tinylm's sweeper on Optuna's ask/tell API
(a stored study that resumes and is shared by workers, pruning, several objectives), with its
checks before the first trial and each trial's pruning callback (README.md, this folder's
guide)."""

from pathlib import Path

from conf.features import Feature

FEATURE = Feature(
    name="optuna",
    conf_dir=Path(__file__).resolve().parent / "conf",
    hydra_plugins=("features.optuna.sweeper:OptunaSearch",),
    sweep_start="features.optuna.checks:sweep_start",
    training_callbacks="features.optuna.pruning:callbacks",
    report="features.optuna.report:add_search",
)
