"""``mode=generate``: a decoder continues ``prompt``; an encoder fills its mask tokens; a
fine-tuned classifier (``mode=finetune``) prints the label it predicts, with its probability
(a regression: the score it predicts)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conf.schema import Settings
from modes.inference import classify_text, fill_mask_text, generate_text, load_for_inference
from training.checkpoint import (
    check_no_model_overrides,
    is_classifier,
    load_classifier,
    read_checkpoint,
)


def run(settings: Settings, callbacks: Sequence[Any] = ()) -> dict[str, Any]:
    checkpoint = read_checkpoint(settings.job.ckpt_path)
    if is_classifier(checkpoint["hyper_parameters"]):
        loaded = load_classifier(settings.job.ckpt_path, checkpoint)
        check_no_model_overrides(settings, loaded.hparams["model_config"], loaded.path)
        prediction = classify_text(loaded, settings.job.prompt)
        if "score" in prediction:  # a regression
            print(f"score {prediction['score']:.4f}")
            return prediction
        ranked = sorted(prediction["probabilities"].items(), key=lambda item: -item[1])
        print(f"{prediction['label']} (p={prediction['probability']:.3f})")
        for name, p in ranked[1:5]:
            print(f"  {name}: {p:.3f}")
        return prediction
    loaded, tokenizer = load_for_inference(settings, checkpoint)
    if loaded.config.arch == "decoder":
        text = generate_text(loaded.model, tokenizer, settings.job, settings.job.prompt or "")
    else:
        text = fill_mask_text(loaded.model, tokenizer, settings.job.prompt)
    print(text)
    return {"text": text}
