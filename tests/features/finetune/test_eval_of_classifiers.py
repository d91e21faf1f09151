"""A fine-tuned classifier in ``mode=eval``: the core hands every checkpoint to the feature's
evaluation (features/finetune/evaluate.py, through its checkpoint hook) with the first one
already read; a language model given ``finetune.*`` settings, and a classifier among language
models, are refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import features.finetune.evaluate
from tests.corpora import make_paragraphs
from tests.evaluation_helpers import (
    Calls,
    EvaluationCounter,
    eval_settings,
    held_text,
    run_eval,
    untrained_checkpoint,
)

PRETRAINED = "/runs/pretrained/checkpoints/best.ckpt"
CLASSIFIER = {"task": "sst2", "pretrained": {"checkpoint": PRETRAINED}}


def _classifier(path: Path) -> Path:
    """An untrained tiny decoder whose hyper-parameters say it is a classifier fine-tuned on
    sst2 (nothing here loads it as one)."""
    payload = torch.load(
        untrained_checkpoint(path, "decoder", make_paragraphs(6)), weights_only=True
    )
    payload["hyper_parameters"]["classifier"] = CLASSIFIER
    torch.save(payload, path)
    return path


def test_classifiers_are_handed_to_their_evaluation_with_the_first_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep = tmp_path / "sweep"
    found = [_classifier(sweep / job / "checkpoints" / "best.ckpt") for job in ("0", "1")]
    evaluation = Calls(returned={"results": ["classifier rows"]})
    monkeypatch.setattr(features.finetune.evaluate, "run", evaluation)
    settings, callbacks = eval_settings(sweep, tmp_path), [EvaluationCounter()]
    result, _ = run_eval(settings, callbacks)
    assert result == {"results": ["classifier rows"]}
    ((handed_settings, checkpoints, first, handed_callbacks),) = evaluation.calls
    assert handed_settings is settings and handed_callbacks is callbacks
    assert checkpoints == found
    assert first["hyper_parameters"]["classifier"] == CLASSIFIER


def test_a_language_model_given_finetune_settings_is_refused_by_name(tmp_path: Path) -> None:
    ckpt = untrained_checkpoint(tmp_path / "best.ckpt", "decoder", make_paragraphs(6))
    with pytest.raises(ValueError) as error:
        run_eval(eval_settings(ckpt, tmp_path, "finetune.task=builtin"))
    assert str(error.value) == (
        f"finetune.task is not read when mode=eval scores a language model, and {ckpt} is "
        "one: drop the finetune.* settings (they are for python train.py mode=finetune "
        f"ckpt_path={ckpt})"
    )


def test_a_classifier_in_a_sweep_of_language_models_is_refused_by_name(tmp_path: Path) -> None:
    paragraphs = make_paragraphs(6)
    sweep = tmp_path / "sweep"
    untrained_checkpoint(sweep / "0" / "checkpoints" / "best.ckpt", "decoder", paragraphs)
    classifier = _classifier(sweep / "1" / "checkpoints" / "best.ckpt")
    with pytest.raises(ValueError) as error:
        run_eval(eval_settings(sweep, tmp_path, f"data.path={held_text(tmp_path, paragraphs)}"))
    assert str(error.value) == (
        f"{classifier} is a classifier fine-tuned on sst2 (mode=finetune), not a language "
        "model; mode=eval needs a pretrained checkpoint, such as the one it was fine-tuned "
        f"from: {PRETRAINED}"
    )
