"""Where an Optuna search keeps its study, and the trial a job of the search runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from conf.hydra_runtime import job_num, sweep_dir

# hydra/sweeper=optuna's sweeper (features/optuna/conf/hydra/sweeper/optuna.yaml).
OPTUNA_SEARCH = "hydra_plugins.tinylm_features.OptunaSearch"


@dataclass(frozen=True)
class SearchTrial:
    """A job's trial of an Optuna search: the study's storage and name, the trial's number
    (the job's), and the pruner that judges its validation losses."""

    storage: str
    study_name: str
    number: int
    pruner: str


def study_location(sweeper: DictConfig, directory: Path) -> tuple[str, str]:
    """An Optuna search's storage URL and study name: ``hydra.sweeper.storage`` (default
    SQLite, ``study.db`` in the sweep directory) and ``hydra.sweeper.study_name`` (default the
    sweep directory's absolute path, so that the workers of one sweep share a study)."""
    storage = sweeper.get("storage") or f"sqlite:///{(directory / 'study.db').resolve()}"
    return str(storage), str(sweeper.get("study_name") or directory.resolve())


def search_trial() -> SearchTrial | None:
    """This job's trial when it runs in an Optuna search with a pruner; None otherwise."""
    directory = sweep_dir()
    if directory is None:
        return None
    sweeper = HydraConfig.get().sweeper
    if sweeper.get("_target_") != OPTUNA_SEARCH or sweeper.get("pruner", "none") == "none":
        return None
    storage, name = study_location(sweeper, directory)
    return SearchTrial(storage, name, job_num(), str(sweeper.pruner))
