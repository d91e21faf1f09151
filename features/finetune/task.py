"""The fine-tuning LightningModule: a sequence classifier's loss, metrics (from each pass's
confusion matrix, or a regression's predictions), AdamW, warmup then cosine decay."""

from __future__ import annotations

import functools
import math
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor
from torchmetrics import CatMetric, MeanMetric
from torchmetrics.classification import MulticlassConfusionMatrix

from conf.schema import OptimConfig
from features.finetune.checkpoints import classifier_outputs, problem_of
from features.finetune.classifier import SequenceClassifier
from features.finetune.config import FinetuneConfig
from features.finetune.labelled import REGRESSION_METRICS
from models.config import ModelConfig
from models.transformer import build_model
from training.callbacks import rng_states, set_rng_states
from training.optim import build_optimizer
from training.task import warmup_cosine


def accuracy(confusion: Tensor) -> float:
    return float(confusion.diagonal().sum() / confusion.sum().clamp(min=1))


def f1_score(confusion: Tensor) -> float:
    """F1 of class 1 when there are two classes, else the macro mean over classes."""
    confusion = confusion.double()
    true_pos = confusion.diagonal()
    precision = true_pos / confusion.sum(0).clamp(min=1)  # (K,) over predictions
    recall = true_pos / confusion.sum(1).clamp(min=1)  # (K,) over true classes
    f1 = 2 * precision * recall / (precision + recall).clamp(min=1e-12)  # (K,)
    return float(f1[1] if confusion.shape[0] == 2 else f1.mean())


def matthews_correlation(confusion: Tensor) -> float:
    """Gorodkin's R_K (the binary MCC for two classes); 0 when a marginal is constant."""
    confusion = confusion.double()
    n = confusion.sum()
    correct = confusion.diagonal().sum()
    predicted = confusion.sum(0)  # (K,)
    true = confusion.sum(1)  # (K,)
    numerator = correct * n - (predicted * true).sum()
    denominator = torch.sqrt((n**2 - (predicted**2).sum()) * (n**2 - (true**2).sum()))
    return float(numerator / denominator) if denominator > 0 else 0.0


METRICS = {"accuracy": accuracy, "f1": f1_score, "mcc": matthews_correlation}


def pearson(predicted: Tensor, true: Tensor) -> float:
    """Pearson's correlation of two [N] vectors; 0 when either is constant (undefined)."""
    x = predicted.double() - predicted.double().mean()  # (N,)
    y = true.double() - true.double().mean()  # (N,)
    denominator = torch.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / denominator) if denominator > 0 else 0.0


def average_ranks(values: Tensor) -> Tensor:
    """[N] ranks from 1, ties sharing their mean rank (what Spearman's correlation ranks)."""
    _, inverse, counts = torch.unique(values, return_inverse=True, return_counts=True)
    first = counts.cumsum(0) - counts  # (U,) how many values lie below each distinct one
    return (first + (counts + 1) / 2).double()[inverse]  # (N,)


def spearman(predicted: Tensor, true: Tensor) -> float:
    """Spearman's rank correlation: Pearson's of the average ranks."""
    return pearson(average_ranks(predicted), average_ranks(true))


def regression_metrics(predicted: Tensor, true: Tensor) -> dict[str, float]:
    """The regression's metrics of one pass: the correlations, their mean, the MSE."""
    correlations = {"pearson": pearson(predicted, true), "spearman": spearman(predicted, true)}
    return {
        "pearson_spearman": (correlations["pearson"] + correlations["spearman"]) / 2,
        **correlations,
        "mse": float(((predicted.double() - true.double()) ** 2).mean()),
    }


REGRESSION_METRIC_NAMES = (*REGRESSION_METRICS, "mse")


def metric_names(problem: str) -> tuple[str, ...]:
    """What a validation or test pass of the ``problem`` logs (``stage/NAME``), loss first."""
    names = REGRESSION_METRIC_NAMES if problem == "regression" else tuple(METRICS)
    return ("loss", *names)


class ClassificationTask(L.LightningModule):
    """Fine-tunes a ``SequenceClassifier``; its hyper-parameters (plain types) rebuild it with
    the tokenizer and the class names, so a checkpoint stands alone."""

    def __init__(
        self,
        model_config: ModelConfig,
        tokenizer_json: str,
        finetune_config: FinetuneConfig,
        classifier: dict[str, Any],
    ) -> None:
        super().__init__()
        # classifier: task, label_names, metric, has_pairs, pretrained (checkpoint, step),
        # problem (absent before regressions: classification).
        self.save_hyperparameters(
            {
                "model_config": model_config.to_dict(),
                "tokenizer_json": tokenizer_json,
                "finetune_config": finetune_config.__dict__.copy(),
                "classifier": dict(classifier),
            }
        )
        self.config = model_config
        self.finetune = finetune_config
        self.label_names: list[str] = list(classifier["label_names"])
        self.regression = problem_of(classifier) == "regression"
        outputs = classifier_outputs(classifier)
        self.model = SequenceClassifier(build_model(model_config), outputs)
        self._loss_means = torch.nn.ModuleDict({s: MeanMetric() for s in ("val", "test")})
        self._confusions = torch.nn.ModuleDict(
            {s: MulticlassConfusionMatrix(max(outputs, 2)) for s in ("val", "test")}
        )
        # A regression's predictions and scores of the pass: [N] each, gathered across ranks.
        self._predictions = torch.nn.ModuleDict({s: CatMetric() for s in ("val", "test")})
        self._scores = torch.nn.ModuleDict({s: CatMetric() for s in ("val", "test")})
        self.confusion: dict[str, list[list[int]]] = {}  # the last pass's, per stage
        self._pending_rng_states: dict[str, Any] | None = None

    def forward(self, batch: dict[str, Tensor]) -> Tensor:
        return self.model(
            batch["input_ids"],
            batch["attention_mask"],
            token_type_ids=batch.get("token_type_ids"),
        )  # (B, K)

    def loss(self, outputs: Tensor, labels: Tensor) -> Tensor:
        """Cross-entropy of the logits [B, K], or a regression's squared error of [B, 1]."""
        if self.regression:
            return F.mse_loss(outputs.float().squeeze(-1), labels.float())
        return F.cross_entropy(outputs.float(), labels)

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        loss = self.loss(self(batch), batch["labels"])
        if not torch.isfinite(loss):
            raise FloatingPointError(
                f"fine-tuning loss became {loss.item()} at step {self.global_step}; lower "
                f"finetune.lr (now {self.finetune.lr})"
            )
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._update("val", batch)

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._update("test", batch)

    def _update(self, stage: str, batch: dict[str, Tensor]) -> None:
        logits = self(batch).float()  # (B, K)
        labels = batch["labels"]  # (B,)
        self._loss_means[stage].update(self.loss(logits, labels), weight=labels.numel())
        if self.regression:
            self._predictions[stage].update(logits.squeeze(-1))
            self._scores[stage].update(labels.float())
        else:
            self._confusions[stage].update(logits.argmax(-1), labels)

    def on_validation_epoch_end(self) -> None:
        self._log_metrics("val")

    def on_test_epoch_end(self) -> None:
        self._log_metrics("test")

    def _log_metrics(self, stage: str) -> None:
        loss = self._loss_means[stage].compute()
        self._loss_means[stage].reset()
        if self.regression:
            predicted = self._predictions[stage].compute()  # (N,), synced across ranks
            true = self._scores[stage].compute()  # (N,)
            self._predictions[stage].reset()
            self._scores[stage].reset()
            values = {"loss": loss, **regression_metrics(predicted, true)}
        else:
            confusion = self._confusions[stage].compute()  # (K, K), synced across ranks
            self._confusions[stage].reset()
            self.confusion[stage] = confusion.long().tolist()
            values = {"loss": loss, **{name: m(confusion) for name, m in METRICS.items()}}
        # Equivalent mutants: sync_dist=False, None or dropped log the same value (torchmetrics
        # has reduced it over the DDP ranks; sync_dist=True only says so).
        for name, value in values.items():
            self.log(
                f"{stage}/{name}",
                value,
                sync_dist=True,  # pragma: no mutate
                prog_bar=stage == "val" and name == "loss",
            )

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["rng_states"] = rng_states()  # dropout resumes where it was

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self._pending_rng_states = checkpoint.get("rng_states")

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        if self._pending_rng_states is not None:
            set_rng_states(self._pending_rng_states)
            self._pending_rng_states = None

    def configure_optimizers(self) -> dict[str, Any]:
        # Known in advance (epochs x batches, or max_steps): asking the trainer would load the
        # train loader before a resume restores its position, and the epoch would restart.
        total = self.hparams["classifier"]["total_steps"]
        warmup = math.ceil(self.finetune.warmup_ratio * total)
        adamw = OptimConfig(
            lr=self.finetune.lr,
            weight_decay=self.finetune.weight_decay,
            beta1=0.9,
            beta2=0.999,
            warmup_steps=warmup,
            min_lr_ratio=0.0,
        )
        optimizer = build_optimizer(
            self, self.model.backbone.blocks, adamw, fused=self.device.type in ("cpu", "cuda")
        )
        multiplier = functools.partial(
            warmup_cosine, warmup_steps=warmup, total_steps=total, min_ratio=0.0
        )
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, multiplier)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }


def classification_task_from_hparams(hparams: dict[str, Any]) -> ClassificationTask:
    """The task of a fine-tuned checkpoint's ``hyper_parameters``; the weights are not loaded."""
    return ClassificationTask(
        model_config=ModelConfig.from_dict(hparams["model_config"]),
        tokenizer_json=hparams["tokenizer_json"],
        finetune_config=FinetuneConfig(**hparams["finetune_config"]),
        classifier=hparams["classifier"],
    )
