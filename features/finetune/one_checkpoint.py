"""One fine-tune of one pretrained checkpoint (or the resumption of an interrupted one): the
classifier trained through the core's trainer, the best validation checkpoint scored on the
test split, the run's record and a line in the pretrained checkpoint's ``eval.jsonl``."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import lightning as L
import torch

from analysis.records import RESULTS_FILE, append_records
from analysis.run_record import Status, run_record, write_record
from common.files import stable_hash
from common.provenance import provenance
from common.ranks import global_rank
from conf.schema import Settings
from data.tokenizer import save_tokenizer, tokenizer_from_json
from features.finetune.config import FinetuneConfig
from features.finetune.encoding import ClassificationDataModule
from features.finetune.task import ClassificationTask, metric_names
from models.config import ModelConfig
from modes.fitting import fit
from modes.report import refresh
from training.checkpoint import check_no_model_overrides, read_checkpoint
from training.precision import native_precision
from training.trainer import finish_logger, training_trainer

IDENTITY = ("evaluation", "checkpoint", "task", "split", "init", "seed", "protocol")


def finetune_checkpoint(
    settings: Settings, ckpt: Path, callbacks: Sequence[L.Callback] = ()
) -> dict[str, Any]:
    """Fine-tune the pretrained checkpoint ``ckpt`` (or resume the interrupted fine-tune it is)
    into ``job.output_dir``; the run's metrics."""
    started_at = time.time()
    out_dir = Path(settings.job.output_dir)
    checkpoint = read_checkpoint(ckpt)
    hparams = checkpoint["hyper_parameters"]
    resume = None
    if "classifier" in hparams:
        resume = str(ckpt)
        pretrained = _resumable(ckpt, checkpoint, settings)
    else:
        pretrained = {"checkpoint": str(ckpt.resolve()), "step": checkpoint.get("global_step", 0)}
    model_config = ModelConfig.from_dict(hparams["model_config"])
    check_no_model_overrides(settings, hparams["model_config"], ckpt)
    tokenizer = tokenizer_from_json(hparams["tokenizer_json"])
    ft = settings.group("finetune")
    max_len = model_config.max_seq_len
    if ft.max_seq_len is not None and ft.max_seq_len > max_len:
        raise ValueError(
            f"finetune.max_seq_len={ft.max_seq_len} is longer than the context of {ckpt} "
            f"({max_len} positions): give at most {max_len}, or null for all of it"
        )
    task = ft.labelled_task()
    datamodule = ClassificationDataModule(
        task.splits,
        tokenizer,
        model_config,
        max_len=ft.max_seq_len or max_len,
        batch_size=ft.batch_size,
        seed=settings.job.seed,
    )
    steps_per_epoch = math.ceil(len(task.splits["train"]) / ft.batch_size)
    total_steps = min(ft.epochs * steps_per_epoch, ft.max_steps or ft.epochs * steps_per_epoch)
    L.seed_everything(settings.job.seed, workers=True, verbose=False)
    classifier = {
        "task": task.name,
        "label_names": task.label_names,
        "metric": task.metric,
        "has_pairs": task.has_pairs,
        "pretrained": pretrained,
        "total_steps": total_steps,
        "problem": task.problem,
    }
    module = ClassificationTask(model_config, hparams["tokenizer_json"], ft, classifier)
    if resume is None and ft.init == "pretrained":
        weights = {
            key.removeprefix("model."): value
            for key, value in checkpoint["state_dict"].items()
            if key.startswith("model.")
        }
        module.model.backbone.load_state_dict(weights)
    if global_rank() == 0:
        out_dir.mkdir(parents=True, exist_ok=True)
        save_tokenizer(tokenizer, out_dir)
        sizes = ", ".join(f"{split} {len(rows)}" for split, rows in task.splits.items())
        kind = task.problem if task.problem == "regression" else f"{len(task.label_names)} classes"
        print(
            f"tinylm: fine-tuning the {model_config.arch} of {ckpt} ({ft.init}) on "
            f"{task.name}: {kind}, {sizes} examples; run dir {out_dir}"
        )
    trainer_settings = replace(
        settings,
        trainer=replace(
            settings.trainer,
            max_epochs=ft.epochs,
            max_steps=total_steps,
            val_check_interval=1.0,
            check_val_every_n_epoch=1,
            limit_val_batches=1.0,
            log_every_n_steps=min(settings.trainer.log_every_n_steps, steps_per_epoch),
        ),
    )
    trainer_settings = native_precision(trainer_settings)
    timer = _TrainTimer()
    trainer = training_trainer(trainer_settings, out_dir, [*callbacks, timer])
    fit(trainer, module, datamodule, resume, trainer_settings)
    checkpointing = trainer.checkpoint_callback  # no validation ran when max_steps < an epoch
    best = checkpointing.best_model_path or checkpointing.last_model_path
    val = trainer.validate(
        module, datamodule=datamodule, ckpt_path=best, weights_only=True, verbose=False
    )[0]
    test = trainer.test(
        module, datamodule=datamodule, ckpt_path=best, weights_only=True, verbose=False
    )[0]
    names = metric_names(task.problem)
    metrics = run_record(
        Status.COMPLETED,
        scores={
            **{f"val_{name}": float(val[f"val/{name}"]) for name in names},
            **{f"test_{name}": float(test[f"test/{name}"]) for name in names},
        },
        mode="finetune",
        arch=model_config.arch,
        task=task.name,
        init=ft.init,
        seed=settings.job.seed,
        pretrained=pretrained["checkpoint"],
        metric=task.metric,
        problem=task.problem,
        label_names=task.label_names,
        n={split: len(rows) for split, rows in task.splits.items()},
        step=trainer.global_step,
        best_val_loss=float(val["val/loss"]),
        **{f"{stage}_confusion": counts for stage, counts in module.confusion.items()},
        examples_per_sec=timer.examples_per_sec(),
        seconds_per_epoch=timer.seconds_per_epoch(),
        started_at=started_at,
        finished_at=time.time(),
        threads=torch.get_num_threads(),
        best_ckpt=best,
        overrides=settings.overrides,
        config=protocol_record(ft),
        provenance=provenance(
            trainer_settings.trainer.precision, trainer_settings.trainer.accelerator
        ),
    )
    if trainer.is_global_zero:
        write_record(out_dir, metrics)
        _record(metrics, protocol_of(ft), pretrained["checkpoint"])
        _print_results(metrics)
        refresh(out_dir)
        refresh(Path(pretrained["checkpoint"]))  # its run's page shows the new record
    finish_logger(trainer)
    return metrics


def protocol_record(ft: FinetuneConfig) -> dict[str, Any]:
    """The fine-tuning settings as the run's record holds them (``config``): JSON's types, so
    that a record read back compares equal."""
    return json.loads(json.dumps({f"finetune.{k}": v for k, v in asdict(ft).items()}))


def _resumable(ckpt: Path, checkpoint: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """A fine-tuned checkpoint resumes its fine-tune when that stopped before its last step
    and the settings are the same; else it is refused: fine-tuning needs a pretrained one."""
    hparams = checkpoint["hyper_parameters"]
    classifier = hparams["classifier"]
    source = classifier["pretrained"]["checkpoint"]
    if checkpoint.get("global_step", 0) >= classifier["total_steps"]:
        raise ValueError(
            f"ckpt_path={ckpt} is a fine-tuned classifier ({classifier['task']}, from "
            f"{source}), already trained to its end; mode=finetune needs a pretrained "
            f"checkpoint such as {source} (to score this one: mode=eval)"
        )
    stored = hparams["finetune_config"]
    differ = [
        f"finetune.{k}={v} (checkpoint: {stored.get(k)})"
        for k, v in asdict(settings.group("finetune")).items()
        if stored.get(k) != v
    ]
    if differ:
        raise ValueError(
            f"ckpt_path={ckpt} is an interrupted fine-tune with other settings: "
            f"{', '.join(differ)}; resume with the checkpoint's values"
        )
    return classifier["pretrained"]


def protocol_of(ft: FinetuneConfig) -> str:
    """The identity of a fine-tune's settings (task, data, init, protocol) in its record."""
    return stable_hash("finetune", sorted(ft.__dict__.items()))


def _record(metrics: dict[str, Any], protocol: str, pretrained: str) -> Path:
    """One line in the pretrained checkpoint's eval.jsonl: the test split's headline metric."""
    record = {
        "evaluation": "finetune",
        "checkpoint": pretrained,
        "task": metrics["task"],
        "split": "test",
        "n": metrics["n"]["test"],
        "metric": metrics["metric"],
        "value": metrics[f"test_{metrics['metric']}"],
        "higher_is_better": True,
        "init": metrics["init"],
        "seed": metrics["seed"],
        "finetuned": metrics["best_ckpt"],
        "protocol": protocol,
        "provenance": metrics["provenance"],
    }

    def identity(r: dict[str, Any]) -> str:
        return stable_hash(*(r.get(key) for key in IDENTITY))

    return append_records(Path(pretrained).parent / RESULTS_FILE, [record], identity)


def _print_results(metrics: dict[str, Any]) -> None:
    print("\n=== tinylm fine-tuning results ===")
    print(f"{'task':>16}: {metrics['task']} ({metrics['init']}, seed {metrics['seed']})")
    for key in ("best_val_loss", *(f"test_{name}" for name in metric_names(metrics["problem"]))):
        print(f"{key:>16}: {metrics[key]:.4f}")
    metric = metrics["metric"]
    print(f"{'metric':>16}: test {metric} {metrics[f'test_{metric}']:.4f}")
    print(f"{'examples/s':>16}: {metrics['examples_per_sec']:.1f}")


class _TrainTimer(L.Callback):
    """Wall time of the training batches (validation excluded) and the examples they held."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.examples = 0
        self.epochs = 0
        self._started = 0.0

    def on_train_batch_start(self, trainer: L.Trainer, module: Any, batch: Any, i: int) -> None:
        self._started = time.perf_counter()

    def on_train_batch_end(
        self, trainer: L.Trainer, module: Any, outputs: Any, batch: Any, i: int
    ) -> None:
        self.seconds += time.perf_counter() - self._started
        self.examples += batch["labels"].numel()

    def on_train_epoch_end(self, trainer: L.Trainer, module: Any) -> None:
        self.epochs += 1

    def examples_per_sec(self) -> float | None:
        return self.examples / self.seconds if self.seconds else None

    def seconds_per_epoch(self) -> float | None:
        return self.seconds / self.epochs if self.epochs else None
