"""``search.json``: what a finished Optuna search tells its summary, which reads it without
Optuna (``report.py``): every trial, the best trial or Pareto front (``best_trials``) and each
parameter's importance for each objective (``get_param_importances``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import optuna


def study_report(study: optuna.Study, objectives: Sequence[str], storage: str) -> dict[str, Any]:
    """The search's record for its summary (a JSON object)."""
    trials = study.get_trials(deepcopy=False)
    best = study.best_trials  # one trial, or the front with several objectives
    return {
        "study_name": study.study_name,
        "storage": storage,
        "objectives": list(objectives),
        "directions": [d.name.lower() for d in study.directions],
        "trials": [
            {
                "number": t.number,
                "state": t.state.name,
                "params": t.params,
                "values": t.values,
                "run": t.user_attrs.get("run"),
                "consumed": t.user_attrs.get("consumed"),
                "error": t.user_attrs.get("error"),
                # the value a pruned trial was stopped at
                "last_reported": _last_reported(t),
            }
            for t in trials
        ],
        "best": sorted(t.number for t in best),
        "importances": {name: _importances(study, index) for index, name in enumerate(objectives)},
    }


def _last_reported(trial: optuna.trial.FrozenTrial) -> float | None:
    reported = trial.intermediate_values
    return reported[max(reported)] if reported else None


def _importances(study: optuna.Study, index: int) -> dict[str, float] | str:
    """Each parameter's importance for objective ``index``, or why there is none."""
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if len(complete) < 2:
        return f"{len(complete)} completed trial(s): importances need at least 2"
    # PED-ANOVA judges what makes the target low: a maximised objective is negated.
    sign = -1.0 if study.directions[index] == optuna.study.StudyDirection.MAXIMIZE else 1.0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # that reminder, once per call
            found = optuna.importance.get_param_importances(
                study, target=lambda t: sign * t.values[index] if t.values else None
            )
    except (RuntimeError, ValueError) as err:
        return str(err)
    return {name: float(value) for name, value in found.items()}
