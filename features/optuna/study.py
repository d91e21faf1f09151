"""An Optuna study in a storage: what the search (``sweeper.py``) and its trials' pruning
(``pruning.py``) share. The storage beats each trial's heart: a trial whose process was killed
is failed once its heartbeat is older than the grace period, and its configuration is queued
again. A study keeps the search that created it (space, objectives, directions): a later search
under its name must ask for the same.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from analysis.run_record import record_path
from features.optuna.checks import CONSUMED, TO_TARGET
from models.config import closest
from optuna.trial import FrozenTrial, TrialState

# Heartbeats and their retry callback are "experimental" in Optuna 5 (since v2.8): tinylm's
# resume rests on them, and its tests say when their interface changes.
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)

# Objectives whose every value is a loss: minimised or nothing.
SAMPLERS = {
    "tpe": optuna.samplers.TPESampler,
    "random": optuna.samplers.RandomSampler,
    "nsgaii": optuna.samplers.NSGAIISampler,
    "grid": optuna.samplers.GridSampler,
}
PRUNERS: dict[str, Callable[[], optuna.pruners.BasePruner]] = {
    "median": optuna.pruners.MedianPruner,
    "hyperband": optuna.pruners.HyperbandPruner,
    "none": optuna.pruners.NopPruner,
}
# A trial that a job ended (completed, pruned, or failed with its error recorded); a trial
# failed because its process died is retried instead and does not count.
JOB_ERROR = "error"
# A trial asked beyond n_trials by workers that asked at once, failed before it ran: not counted.
SURPLUS = "surplus"
# How often a killed trial's configuration is queued again before the search gives it up.
MAX_RETRY = 2
_OPEN_ATTEMPTS = 10
# What a database says to the worker that loses the race to create the storage's tables
# (SQLite's words, then PostgreSQL's and MySQL's).
_CREATION_RACES = ("already exists", "locked", "UNIQUE constraint", "duplicate key", "Duplicate")
# The user attribute holding the search that created a study.
SEARCH = "tinylm_search"


@dataclass(frozen=True)
class Search:
    """What a study answers: its search space (key -> the override as typed), its objectives
    and their directions."""

    space: dict[str, str]
    objectives: list[str]
    directions: list[str]

    def record(self) -> dict[str, Any]:
        return {"space": self.space, "objectives": self.objectives, "directions": self.directions}


class RetryKilledTrial(optuna.storages.RetryHeartbeatStaleTrialCallback):
    """Optuna's retry of a trial failed for a stale heartbeat (``RetryFailedTrialCallback`` is
    its deprecated alias), remembering which it failed: their runs' records say so."""

    def __init__(self) -> None:
        super().__init__(max_retry=MAX_RETRY)
        self.failed: list[FrozenTrial] = []

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.failed.append(trial)
        super().__call__(study, trial)


def open_storage(
    url: str, heartbeat_interval: int | None = None, grace_period: int | None = None
) -> optuna.storages.RDBStorage:
    """The RDB storage at ``url`` (heartbeats when ``heartbeat_interval`` is given); a URL that
    cannot be opened is a ValueError in one line. Workers that open a new database at once
    race to create its tables: the loser tries again when the winner is done."""
    attempt = 1
    while True:
        try:
            return optuna.storages.RDBStorage(
                url,
                heartbeat_interval=heartbeat_interval,
                grace_period=grace_period,
                heartbeat_stale_trial_callback=RetryKilledTrial() if heartbeat_interval else None,
            )
        except Exception as err:  # SQLAlchemy's and the drivers' errors have no common base
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
            if attempt < _OPEN_ATTEMPTS and any(race in reason for race in _CREATION_RACES):
                attempt += 1
                time.sleep(0.5)
                continue
            raise ValueError(
                f"hydra.sweeper.storage={url} cannot be opened ({type(err).__name__}: {reason}); "
                "give a database URL this machine reaches (sqlite:///PATH/study.db, "
                "postgresql://USER@HOST/DB with its driver installed), or leave it at null for "
                "the sweep directory's study.db"
            ) from None


def make_sampler(settings: Mapping[str, Any], space: Mapping[str, Sequence[Any]] | None = None):
    """The sampler ``settings`` names (``name`` and the sampler's keyword arguments); the grid
    sampler takes ``space``, each key's values."""
    settings = dict(settings)
    name = str(settings.pop("name", "tpe"))
    if name not in SAMPLERS:
        raise ValueError(_unknown("hydra.sweeper.sampler.name", name, SAMPLERS))
    sampler = SAMPLERS[name]
    if name == "grid":
        if space is None:
            raise ValueError(
                "hydra/sweeper/sampler=grid searches choice(..) and range(..) keys only: give "
                "each searched key a list of values, or choose another sampler"
            )
        settings["search_space"] = dict(space)
    try:
        return sampler(**settings)
    except TypeError as err:
        raise ValueError(f"hydra/sweeper/sampler={name}: {err}") from None


def make_pruner(name: str) -> optuna.pruners.BasePruner:
    if name not in PRUNERS:
        raise ValueError(_unknown("hydra.sweeper.pruner", name, PRUNERS))
    return PRUNERS[name]()


def open_study(
    storage: optuna.storages.BaseStorage,
    name: str,
    search: Search,
    sampler: optuna.samplers.BaseSampler | None = None,
    pruner: optuna.pruners.BasePruner | None = None,
) -> optuna.Study:
    """The study ``name`` in ``storage``, created for ``search`` or loaded; a study of that name
    made for another search (space, objectives or directions) is a ValueError naming both."""
    try:
        study = optuna.create_study(
            storage=storage,
            study_name=name,
            directions=search.directions,
            sampler=sampler,
            pruner=pruner,
        )
        study.set_user_attr(SEARCH, search.record())
        return study
    except optuna.exceptions.DuplicatedStudyError:
        study = optuna.load_study(study_name=name, storage=storage, sampler=sampler, pruner=pruner)
    stored = _stored_search(study)
    if stored is None:  # not made by tinylm: its directions are all there is to compare
        stored = {"directions": [d.name.lower() for d in study.directions]}
    asked = search.record()
    differ = [key for key in stored if stored[key] != asked.get(key)]
    if differ:
        there = "; ".join(f"{k}={stored[k]}" for k in differ)
        here = "; ".join(f"{k}={asked[k]}" for k in differ)
        raise ValueError(
            f"the study {name!r} in this storage was made for another search ({there}), and "
            f"this command asks for {here}: give a new hydra.sweeper.study_name (or "
            "hydra.sweep.dir), or the first search's settings to resume it"
        )
    return study


def _stored_search(study: optuna.Study) -> dict[str, Any] | None:
    """The search a study was made for; a worker that loads a study another has just created
    waits a moment for its record."""
    for _ in range(20):
        stored = study.user_attrs.get(SEARCH)
        # A study with trials: its creator finished creating it long ago.
        if stored is not None or study.get_trials(deepcopy=False):
            return stored
        time.sleep(0.25)
    return study.user_attrs.get(SEARCH)


def finished_trials(study: optuna.Study) -> list[FrozenTrial]:
    """The trials that count towards ``n_trials``: those a job ended."""
    return [
        t
        for t in study.get_trials(deepcopy=False)
        if t.state in (TrialState.COMPLETE, TrialState.PRUNED)
        or (t.state == TrialState.FAIL and JOB_ERROR in t.user_attrs)
    ]


def running_trials(study: optuna.Study) -> list[FrozenTrial]:
    return study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))


def beyond_n_trials(study: optuna.Study, n_trials: int) -> set[int]:
    """The numbers of the running trials past the first ``n_trials`` that count (finished or
    running, by trial number): workers that check the count and then ask at the same time
    ask one too many, and the storage's numbering decides, alike in every worker, which."""
    running = {t.number for t in running_trials(study)}
    counted = sorted([*(t.number for t in finished_trials(study)), *running])
    return running - set(counted[:n_trials])


def trial_id(storage: optuna.storages.BaseStorage, study: optuna.Study, number: int) -> int:
    """The storage's id of trial ``number`` of ``study`` (what heartbeats and
    ``optuna.trial.Trial`` take): a KeyError when the study has no such trial."""
    study_id = storage.get_study_id_from_name(study.study_name)
    return storage.get_trial_id_from_study_id_trial_number(study_id, number)


def fail_killed_trials(
    study: optuna.Study, storage: optuna.storages.RDBStorage
) -> list[FrozenTrial]:
    """Mark the RUNNING trials of ``study`` whose heartbeat is older than the grace period as
    failed, queue their configurations again, and return them (``storage``: ``open_storage``'s
    with heartbeats)."""
    callback = storage.get_heartbeat_stale_trial_callback()
    optuna.storages.fail_stale_trials(study)
    killed, callback.failed = callback.failed, []
    return killed


def objective_values(metrics: Mapping[str, Any], objectives: Sequence[str]) -> list[float]:
    """The values of ``objectives`` in a job's record: its keys (``best_val_loss``,
    ``params``, ``flops_per_token``, ...) or what it consumed (``steps``, ``tokens``,
    ``flops``, ``seconds``). An objective the job did not record is a ValueError; a time to
    the target that the job recorded as not reached (None, under ``trainer.stop_at_loss``) is
    infinite, the worst a minimised value can be."""
    values = []
    for name in objectives:
        value = metrics.get("consumed", {}).get(name) if name in CONSUMED else metrics.get(name)
        if name in TO_TARGET and name in metrics and value is None:
            value = math.inf
        elif not _is_number(value):
            recorded = sorted(
                [k for k, v in metrics.items() if _is_number(v)]
                + [k for k in CONSUMED if _is_number(metrics.get("consumed", {}).get(k))]
            )
            hint = closest(name, recorded)
            guess = f" (did you mean {hint}?)" if hint else ""
            raise ValueError(
                f"hydra.sweeper.objectives: {name} is not recorded by this search's jobs{guess}; "
                f"their {record_path().name} has: {', '.join(recorded)}"
            )
        values.append(float(value))
    return values


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _unknown(key: str, name: str, known: Mapping[str, Any]) -> str:
    hint = closest(name, list(known))
    guess = f" (did you mean {hint}?)" if hint else ""
    return f"{key}={name} is unknown{guess}; choose one of: {', '.join(known)}"
