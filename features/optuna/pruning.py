"""A trial of an Optuna search with a pruner: its job reports the validation loss at every
validation and stops when the pruner says so, by Lightning's own ``trainer.should_stop``, so
its checkpoints are written as at any end of training. Optuna is imported only when a trial is
opened, so ``mode=train`` loads without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lightning as L

from analysis.run_record import Status
from common.ranks import global_rank
from conf.schema import Settings
from features.optuna.trial import search_trial

if TYPE_CHECKING:
    import optuna


class PruneHopelessTrial(L.Callback):
    """Report ``val/loss`` at each validation to ``trial``; stop when it should be pruned."""

    def __init__(self, trial: optuna.Trial | None) -> None:
        self.trial = trial  # None on the ranks but the first, which follow its decision
        self.pruned_at: int | None = None

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        prune = False
        loss = trainer.callback_metrics.get("val/loss")
        if self.trial is not None and loss is not None:
            self.trial.report(float(loss), step=trainer.global_step)
            prune = self.trial.should_prune()
        prune = trainer.strategy.broadcast(prune, src=0)
        if prune:
            self.pruned_at = trainer.global_step
            trainer.should_stop = True

    @property
    def run_status(self) -> Status | None:
        """How the run ended, for its record (``modes/train.py``): pruned, once pruned."""
        return None if self.pruned_at is None else Status.PRUNED


def trial_pruning(storage: str, study_name: str, number: int, pruner: str) -> PruneHopelessTrial:
    """The pruning callback of trial ``number`` of the study ``study_name`` in ``storage``."""
    if global_rank() != 0:
        return PruneHopelessTrial(None)
    import optuna
    from features.optuna.study import make_pruner, open_storage, trial_id

    opened = open_storage(storage)
    study = optuna.load_study(study_name=study_name, storage=opened, pruner=make_pruner(pruner))
    return PruneHopelessTrial(optuna.trial.Trial(study, trial_id(opened, study, number)))


def callbacks(settings: Settings) -> list[L.Callback]:
    """A trial's pruning callback, when ``mode=train`` runs as a trial of a search with a
    pruner (``conf/features.py``'s training callbacks)."""
    trial = search_trial() if settings.job.mode == "train" else None
    if trial is None:
        return []
    return [trial_pruning(trial.storage, trial.study_name, trial.number, trial.pruner)]
