"""A fine-tuned classifier's checkpoint in the core's commands (``conf/features.py``'s hooks):
generate predicts a label, export writes a ``*ForSequenceClassification`` folder, and the
modes that need a language model name the checkpoint it came from."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, processors

from conf.schema import Settings
from data.tokenizer import special_tokens_of, tokenizer_from_json
from features.finetune.classifier import SequenceClassifier
from features.finetune.encoding import PadCollator, encode_examples
from features.finetune.labelled import Example
from models.config import ModelConfig
from models.transformer import build_model
from modes.export import output_path
from training.checkpoint import (
    LoadedCheckpoint,
    check_no_model_overrides,
    check_tokenizer_fits,
    loaded_checkpoint,
    read_checkpoint,
)

# A fine-tuned classifier's transformers class per family, and the prefix of the base model's
# weights in it (the language-model head's are left out).
HF_CLASSIFIERS = {
    "GPT2LMHeadModel": ("GPT2ForSequenceClassification", "transformer."),
    "GPTNeoXForCausalLM": ("GPTNeoXForSequenceClassification", "gpt_neox."),
    "BertForMaskedLM": ("BertForSequenceClassification", "bert."),
}


def problem_of(classifier: dict[str, Any]) -> str:
    """Classification or regression (checkpoints from before regressions: classification)."""
    return classifier.get("problem", "classification")


def classifier_outputs(classifier: dict[str, Any]) -> int:
    """The head's outputs: one per class, or a regression's one score."""
    return 1 if problem_of(classifier) == "regression" else len(classifier["label_names"])


def describe(path: str | Path, hparams: dict[str, Any], mode: str | None) -> str:
    """Why a classifier is refused where a pretrained language model is needed."""
    classifier = hparams["classifier"]
    return (
        f"{path} is a classifier fine-tuned on {classifier['task']} (mode=finetune), not a "
        f"language model; {f'mode={mode}' if mode else 'this'} needs a pretrained checkpoint, "
        f"such as the one it was fine-tuned from: {classifier['pretrained']['checkpoint']}"
    )


def load_classifier(path: str | Path, checkpoint: dict[str, Any] | None = None) -> LoadedCheckpoint:
    """The ``SequenceClassifier`` of a fine-tuned checkpoint (``checkpoint``: its contents, when
    read already), in eval mode on the CPU."""
    checkpoint = checkpoint or read_checkpoint(path)
    hparams = checkpoint["hyper_parameters"]
    if "classifier" not in hparams:
        raise ValueError(
            f"{path} is a pretrained language model, not a fine-tuned classifier; fine-tune "
            f"it first: python train.py mode=finetune ckpt_path={path}"
        )
    config = ModelConfig.from_dict(hparams["model_config"])
    check_tokenizer_fits(hparams["tokenizer_json"], config, path)
    model = SequenceClassifier(build_model(config), classifier_outputs(hparams["classifier"]))
    model.load_state_dict(
        {k.removeprefix("model."): v for k, v in checkpoint["state_dict"].items()}
    )
    return loaded_checkpoint(path, model, config, hparams, checkpoint)


def generate(
    settings: Settings, checkpoints: Sequence[Path], first: dict[str, Any], callbacks: Any = ()
) -> dict[str, Any]:
    """``mode=generate`` on a classifier: the label it predicts for ``prompt``."""
    loaded = load_classifier(checkpoints[0], first)
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


def classify_text(loaded: LoadedCheckpoint, prompt: str | None) -> dict[str, Any]:
    """The label predicted for ``prompt`` (a pair: ``A [SEP] B``), its probability and every
    class's; a regression's score."""
    classifier = loaded.hparams["classifier"]
    if not prompt:
        raise ValueError(
            f"{loaded.path} is a classifier ({classifier['task']}): give the text to classify, "
            'prompt="..."'
        )
    tokenizer = tokenizer_from_json(loaded.tokenizer_json)
    specials = special_tokens_of(tokenizer)
    first, _, second = (part.strip() for part in prompt.partition(specials.sep))
    if bool(second) != classifier["has_pairs"]:
        wanted = f"two texts, A {specials.sep} B" if classifier["has_pairs"] else "one text"
        raise ValueError(f"{loaded.path} classifies {wanted}: give prompt= as {wanted}")
    rows = encode_examples(
        [Example(first, second or None, 0)],
        tokenizer,
        arch=loaded.config.arch,
        max_len=loaded.config.max_seq_len,
        token_types=loaded.config.type_vocab_size > 0,
    )
    batch = PadCollator(specials.pad_id)(rows)
    with torch.inference_mode():
        logits = loaded.model(
            batch["input_ids"],
            batch["attention_mask"],
            token_type_ids=batch.get("token_type_ids"),
        )  # (1, K)
    if problem_of(classifier) == "regression":
        return {"score": float(logits[0, 0])}
    probs = logits[0].float().softmax(-1).tolist()
    names = classifier["label_names"]
    best = max(range(len(names)), key=probs.__getitem__)
    return {
        "label": names[best],
        "probability": probs[best],
        "probabilities": dict(zip(names, probs, strict=True)),
    }


def export(
    settings: Settings, checkpoints: Sequence[Path], first: dict[str, Any], callbacks: Any = ()
) -> dict[str, Any]:
    """``mode=export export.format=hf`` on a classifier: the family's
    ``*ForSequenceClassification`` folder, its ``id2label`` the class names."""
    from training.hf_export import filled_hf_model, write_hf_folder
    from training.hf_families import hf_family

    ckpt, export = checkpoints[0], settings.export
    if export.format != "hf":
        raise ValueError(
            f"{ckpt} is a fine-tuned classifier: export it with export.format=hf (a "
            "transformers *ForSequenceClassification folder); safetensors is for language "
            "models"
        )
    out = output_path(ckpt, export)  # free, or overwrite: mode=export checked before reading
    loaded = load_classifier(ckpt, first)
    check_no_model_overrides(settings, loaded.hparams["model_config"], ckpt)
    model, tokenizer = loaded.model, tokenizer_from_json(loaded.tokenizer_json)
    family = hf_family(model.config)
    family.check(model.config)
    class_name, prefix = HF_CLASSIFIERS[family.model_class]
    weights = {k: v for k, v in family.weights(model.backbone).items() if k.startswith(prefix)}
    if model.pooler is not None:  # BERT's pooler and classifier
        weights |= {
            "bert.pooler.dense.weight": model.pooler.weight,
            "bert.pooler.dense.bias": model.pooler.bias,
            "classifier.weight": model.score.weight,
            "classifier.bias": model.score.bias,
        }
    else:
        weights["score.weight"] = model.score.weight
    names = loaded.hparams["classifier"]["label_names"] or ["score"]  # a regression has none
    kwargs = family.config_kwargs(model.config, special_tokens_of(tokenizer)) | {
        "num_labels": model.num_labels,
        "id2label": dict(enumerate(names)),
        "label2id": {name: i for i, name in enumerate(names)},
    }
    if model.num_labels == 1:
        kwargs["problem_type"] = "regression"
    hf_model = filled_hf_model(family.config_class, class_name, kwargs, weights)
    out = write_hf_folder(hf_model, classifier_tokenizer(tokenizer, loaded.config), out)
    print(f"wrote {out}")
    return {export.format: str(out)}


def classifier_tokenizer(tokenizer: Tokenizer, config: ModelConfig) -> Any:
    """The transformers tokenizer, right-padded, framing a decoder's input as fine-tuning read
    it (``a EOS b EOS``; an encoder's frames as its language model's)."""
    from training.hf_export import hf_tokenizer

    if config.arch == "decoder":
        tokenizer = Tokenizer.from_str(tokenizer.to_str())  # a copy: the template is ours only
        eos = special_tokens_of(tokenizer)
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"$A {eos.eos}",
            pair=f"$A {eos.eos} $B {eos.eos}",
            special_tokens=[(eos.eos, eos.eos_id)],
        )
    return hf_tokenizer(tokenizer, config, padding_side="right")
