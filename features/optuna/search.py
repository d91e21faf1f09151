"""One worker's run of an Optuna search (``sweeper.py``): the study opened, trials asked, run as
jobs of the launcher while their hearts beat, and told their jobs' results until the study holds
``n_trials`` finished ones; then ``search.json``, what the summary reads without Optuna
(``report.py``), and ``optimization_results.yaml``.
"""

from __future__ import annotations

import json
import re
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, Transformer
from hydra.core.utils import JobReturn
from omegaconf import DictConfig, OmegaConf

import optuna
from analysis.records import DamagedRecord
from analysis.run_record import Status, read_record, run_record, write_record
from conf.command_line import value_text
from features.optuna import study as studies
from features.optuna.checks import LOSSES, TO_TARGET
from features.optuna.trial import study_location
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

# interval(LOW, HIGH) with both ends typed as integers: an integer search.
_INTEGER_INTERVAL = re.compile(r"interval\(\s*[+-]?\d+\s*,\s*[+-]?\d+\s*\)")


class SearchWorker:
    """One worker's run of a search: the study opened, trials asked and told until the study
    holds ``n_trials`` finished ones."""

    def __init__(
        self, settings: dict[str, Any], sweeper: DictConfig, arguments: list[str], sweep_dir: Path
    ) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        # Optuna heartbeats only inside Study.optimize; tinylm's ask/tell loop beats its
        # trials' hearts itself (_Heartbeats).
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
        self.sweep_dir = sweep_dir
        self.n_trials = int(settings["n_trials"])
        self.n_jobs = int(settings["n_jobs"])
        self.heartbeat_interval = int(settings["heartbeat_interval"])
        objectives = list(settings["objectives"])
        directions = list(settings["directions"] or [settings["direction"]])
        _check_objectives(objectives, directions, str(settings["pruner"]))
        parsed = OverridesParser.create().parse_overrides(
            [*(f"{k}={v}" for k, v in (settings["params"] or {}).items()), *arguments]
        )
        by_key = {o.get_key_element(): o for o in parsed}  # the command line's last word wins
        self.fixed = [o.input_line for o in by_key.values() if not o.is_sweep_override()]
        searched = {k: o for k, o in by_key.items() if o.is_sweep_override()}
        self.distributions = {k: _distribution(o) for k, o in searched.items()}
        space = {k: value_text(o) for k, o in searched.items()}
        self.sampler_settings = OmegaConf.to_container(sweeper.sampler, resolve=True)
        self.grid = _grid(searched) if self.sampler_settings.get("name") == "grid" else None
        sampler = studies.make_sampler(self.sampler_settings, self.grid)
        pruner = studies.make_pruner(str(settings["pruner"]))
        self.storage_url, self.study_name = study_location(sweeper, sweep_dir)
        self.storage = studies.open_storage(
            self.storage_url, self.heartbeat_interval, int(settings["grace_period"])
        )
        self.study = studies.open_study(
            self.storage,
            self.study_name,
            studies.Search(space, objectives, directions),
            sampler=sampler,
            pruner=pruner,
        )
        self.objectives = objectives
        self.completed = 0
        self.finished = 0

    def run(self, launcher: Any) -> None:
        done = len(studies.finished_trials(self.study))
        print(
            f"tinylm: Optuna study {self.study_name!r} in {self.storage_url}: {done} of "
            f"{self.n_trials} trials finished"
        )
        waiting_said = False
        while True:
            for killed in studies.fail_killed_trials(self.study, self.storage):
                self._record_killed(killed)
            done = len(studies.finished_trials(self.study))
            running = len(studies.running_trials(self.study))
            wanted = min(self.n_jobs, self.n_trials - done - running)
            if wanted > 0:
                trials = self._within_n_trials([self._ask() for _ in range(wanted)])
                if trials:
                    self._run_batch(launcher, trials)
                continue
            if done >= self.n_trials:
                break
            if not waiting_said:  # the rest runs elsewhere, or in a process that died
                print(
                    f"tinylm: waiting for {running} trial(s) running in another process; one "
                    "whose process died is retried once its heartbeat is stale"
                )
                waiting_said = True
            time.sleep(self.heartbeat_interval)
        trials = studies.finished_trials(self.study)
        self.finished = len(trials)
        self.completed = sum(t.state.name == "COMPLETE" for t in trials)
        if self.completed:
            self._write_results()

    def _ask(self) -> Any:
        """A new trial with its parameters drawn. A seeded sampler draws trial N from ``seed``
        + N: a sampler's random state lives in its process, not in the study, so a search
        re-run, or a second worker, would otherwise draw its first trials again; this way the
        same history gives the same draws whoever asks."""
        trial = self.study.ask()
        # At once: a trial killed before its first heartbeat would never be found stale.
        self.storage.record_heartbeat(studies.trial_id(self.storage, self.study, trial.number))
        seed = self.sampler_settings.get("seed")
        if seed is not None:
            settings = {**self.sampler_settings, "seed": int(seed) + trial.number}
            self.study.sampler = studies.make_sampler(settings, self.grid)
        for name, distribution in self.distributions.items():
            _suggest(trial, name, distribution)
        return trial

    def _within_n_trials(self, asked: list[Any]) -> list[Any]:
        """The asked trials within ``n_trials``; the others (another worker asked at the same
        time) are failed as surplus before they run, and the loop counts again."""
        beyond = studies.beyond_n_trials(self.study, self.n_trials)
        for trial in asked:
            if trial.number in beyond:
                trial.set_user_attr(studies.SURPLUS, "asked beyond n_trials at once; never run")
                self.study.tell(trial, state=studies.TrialState.FAIL)
        return [t for t in asked if t.number not in beyond]

    def _run_batch(self, launcher: Any, trials: list[Any]) -> None:
        """Run ``trials`` as jobs numbered by their trial numbers, beating their hearts."""
        ids = [studies.trial_id(self.storage, self.study, t.number) for t in trials]
        beating = _Heartbeats(self.storage, ids, self.heartbeat_interval)
        try:
            for group in _consecutive(trials):
                batch = [[*self.fixed, *_trial_overrides(t)] for t in group]
                returns = launcher.launch(batch, initial_job_idx=group[0].number)
                for trial, job in zip(group, returns, strict=True):
                    self._tell(trial, job)
        finally:
            beating.stop()

    def _tell(self, trial: Any, job: JobReturn) -> None:
        run_dir = Path(job.hydra_cfg.hydra.runtime.output_dir) if job.hydra_cfg else None
        try:
            metrics = (read_record(run_dir) if run_dir else None) or {}
        except DamagedRecord as err:
            metrics = run_record(Status.FAILED, error=str(err))
        trial.set_user_attr("run", run_dir.name if run_dir else None)
        if isinstance(metrics.get("consumed"), dict):
            trial.set_user_attr("consumed", metrics["consumed"])
        status = metrics.get("status")
        if status == Status.COMPLETED:
            try:
                values = studies.objective_values(metrics, self.objectives)
            except ValueError:
                trial.set_user_attr(studies.JOB_ERROR, "its objectives are not recorded")
                self.study.tell(trial, state=studies.TrialState.FAIL)
                raise
            self.study.tell(trial, values)
        elif status == Status.PRUNED:
            self.study.tell(trial, state=studies.TrialState.PRUNED)
        else:
            error = metrics.get("error") or f"the job ended without a result ({job.status.name})"
            trial.set_user_attr(studies.JOB_ERROR, str(error))
            self.study.tell(trial, state=studies.TrialState.FAIL)

    def _record_killed(self, trial: Any) -> None:
        """A trial failed for a stale heartbeat: its run, if it left one, says so."""
        run_dir = self.sweep_dir / str(trial.number)
        print(
            f"tinylm: trial {trial.number} was left RUNNING by a process that stopped; it is "
            "marked failed and its configuration is tried again"
        )
        try:
            stored = read_record(run_dir)
        except DamagedRecord:
            stored = None
        if stored is not None and stored.get("status") == Status.RUNNING:
            error = "its process stopped (no heartbeat); its configuration was tried again"
            write_record(run_dir, {**stored, "status": Status.FAILED, "error": error})

    def _write_results(self) -> None:
        report = study_report(self.study, self.objectives, self.storage_url)
        (self.sweep_dir / "search.json").write_text(json.dumps(report, indent=1) + "\n")
        if len(self.objectives) == 1:
            best = self.study.best_trial
            results = {"name": "optuna", "best_params": best.params, "best_value": best.value}
            OmegaConf.save(OmegaConf.create(results), self.sweep_dir / "optimization_results.yaml")


class _Heartbeats:
    """A thread that records the heartbeats of the trials ``ids`` in ``storage`` until
    stopped: a worker that dies stops beating, and its trials are then known to be dead."""

    def __init__(self, storage: Any, ids: list[int], interval: int) -> None:
        self.stopped = threading.Event()

        def keep_beating() -> None:  # the first beat came with the trial (SearchWorker._ask)
            while not self.stopped.wait(interval):
                for trial_id in ids:
                    storage.record_heartbeat(trial_id)

        self.thread = threading.Thread(target=keep_beating, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()


def _check_objectives(objectives: list[str], directions: list[str], pruner: str) -> None:
    if len(objectives) != len(directions):
        raise ValueError(
            f"hydra.sweeper.objectives={objectives} and hydra.sweeper.directions={directions} "
            "differ in length: give one direction (minimize or maximize) per objective"
        )
    for objective, direction in zip(objectives, directions, strict=True):
        if direction not in ("minimize", "maximize"):
            raise ValueError(
                f"hydra.sweeper.directions: {direction} is not a direction; each is minimize "
                "or maximize"
            )
        if objective in (*LOSSES, *TO_TARGET) and direction != "minimize":
            kind = "a loss" if objective in LOSSES else "a time to a target"
            raise ValueError(
                f"hydra.sweeper.direction(s): {objective} is {kind} to minimise, not to "
                f"{direction}; give minimize for it"
            )
    if len(objectives) > 1 and pruner != "none":
        raise ValueError(
            f"hydra.sweeper.pruner={pruner} prunes a search of one objective (Optuna compares "
            f"one curve); this one has {len(objectives)}: leave hydra.sweeper.pruner at none"
        )


def _distribution(override: Override) -> Any:
    """The Optuna distribution of a searched key: interval -> float (integer when both ends
    are typed as integers; log scale with ``tag(log, ...)``), range -> integers (floats: their
    values), choice -> its values."""
    value = override.value()
    if override.is_interval_sweep():
        log = "log" in value.tags
        if _INTEGER_INTERVAL.search(value_text(override)):
            return IntDistribution(int(value.start), int(value.end), log=log)
        return FloatDistribution(value.start, value.end, log=log)
    values = list(override.sweep_iterator())
    if override.is_range_sweep() and all(isinstance(v, int) for v in values) and len(values) > 1:
        return IntDistribution(values[0], values[-1], step=values[1] - values[0])
    return CategoricalDistribution(values)


def _suggest(trial: Any, name: str, distribution: Any) -> None:
    """Draw ``name`` from ``distribution`` through the trial's public suggest API."""
    if isinstance(distribution, FloatDistribution):
        low, high = distribution.low, distribution.high
        trial.suggest_float(name, low, high, step=distribution.step, log=distribution.log)
    elif isinstance(distribution, IntDistribution):
        low, high = distribution.low, distribution.high
        trial.suggest_int(name, low, high, step=distribution.step, log=distribution.log)
    else:
        trial.suggest_categorical(name, distribution.choices)


def _grid(searched: dict[str, Override]) -> dict[str, list[Any]] | None:
    """Each searched key's values for the grid sampler; None when a key is an interval."""
    if any(o.is_interval_sweep() for o in searched.values()):
        return None
    return {k: list(o.sweep_iterator()) for k, o in searched.items()}


def _trial_overrides(trial: Any) -> list[str]:
    return [f"{key}={Transformer.encode(value)}" for key, value in trial.params.items()]


def _consecutive(trials: list[Any]) -> list[list[Any]]:
    """``trials`` in runs of consecutive numbers: a launch numbers its jobs from one index.
    Another worker asking at the same time can leave gaps."""
    groups: list[list[Any]] = []
    for trial in sorted(trials, key=lambda t: t.number):
        if groups and groups[-1][-1].number == trial.number - 1:
            groups[-1].append(trial)
        else:
            groups.append([trial])
    return groups


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
