"""A tinylm network as a Hugging Face ``transformers`` folder, loadable without tinylm.

The family (GPT-2, GPT-NeoX or BERT) is chosen once from the config (a fine-tuned
classifier becomes the family's ``*ForSequenceClassification``, ``CLASSIFIERS``); what it
maps, refuses and how it renames the weights lives in its entry in
``training.hf_families``. Here: the transformers model built from that entry (checking that
it lays out exactly the parameters the entry fills), the tokenizer, and the folder, written
whole.

``transformers`` is an optional dependency (``pip install -e ".[hf]"``): it is imported here
only, when an export to it is asked for.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, processors

from data.tokenizer import special_tokens_of, tokenizer_from_json
from models.classifier import SequenceClassifier
from models.config import ModelConfig
from models.transformer import Decoder, Encoder
from training.checkpoint import LoadedCheckpoint, check_output_free
from training.hf_families import hf_family


def require_transformers() -> Any:
    """The ``transformers`` module, or a one-line error that says how to install it."""
    try:
        import transformers
    except ImportError:
        raise ValueError(
            'export.format=hf needs Hugging Face transformers: pip install -e ".[hf]" (or pip '
            "install transformers); export.format=safetensors needs nothing more"
        ) from None
    return transformers


# A fine-tuned classifier's transformers class per family, and the prefix of the base model's
# weights in it (the language-model head's are left out).
CLASSIFIERS = {
    "GPT2LMHeadModel": ("GPT2ForSequenceClassification", "transformer."),
    "GPTNeoXForCausalLM": ("GPTNeoXForSequenceClassification", "gpt_neox."),
    "BertForMaskedLM": ("BertForSequenceClassification", "bert."),
}


def to_hf_model(
    model: Encoder | Decoder | SequenceClassifier,
    tokenizer: Tokenizer,
    label_names: list[str] | None = None,
) -> Any:
    """The family's transformers model (eval mode, CPU, fp32) computing what ``model``
    computes; a setting the family cannot reproduce is refused first, by name. A
    ``SequenceClassifier`` becomes the family's ``*ForSequenceClassification`` with
    ``label_names`` as its ``id2label``; one output with none is a regression
    (``problem_type="regression"``: transformers' MSE loss, the score as its one logit)."""
    transformers = require_transformers()
    family = hf_family(model.config)
    family.check(model.config)
    config_class = getattr(transformers, family.config_class)
    kwargs = family.config_kwargs(model.config, special_tokens_of(tokenizer))
    if isinstance(model, SequenceClassifier):
        class_name, mapped = _classifier_weights(family.model_class, family.weights, model)
        regression = model.num_labels == 1
        numbered = [str(i) for i in range(model.num_labels)]
        names = label_names or (["score"] if regression else numbered)
        kwargs |= {
            "num_labels": model.num_labels,
            "id2label": dict(enumerate(names)),
            "label2id": {name: i for i, name in enumerate(names)},
        }
        if regression:
            kwargs["problem_type"] = "regression"
    else:
        class_name, mapped = family.model_class, family.weights(model)
    config = config_class(**kwargs)
    cls = getattr(transformers, class_name)
    hf_model = cls(config)
    params = dict(hf_model.named_parameters(remove_duplicate=False))
    if params.keys() != mapped.keys():
        # A transformers release that renames or adds parameters: say which, do not guess.
        missing, extra = (
            sorted(params.keys() - mapped.keys()),
            sorted(mapped.keys() - params.keys()),
        )
        raise RuntimeError(
            f"transformers {transformers.__version__} lays out {cls.__name__} differently: "
            f"unmapped {missing}, unknown {extra}"
        )
    with torch.no_grad():
        for name, param in params.items():
            param.copy_(mapped[name].float())
    return hf_model.eval()


def _classifier_weights(
    lm_class: str, lm_weights: Any, model: SequenceClassifier
) -> tuple[str, dict[str, torch.Tensor]]:
    """The classification class and its weights: the base model's, renamed as the family's
    language model has them, and the head (BERT's pooler and classifier, or ``score``)."""
    class_name, prefix = CLASSIFIERS[lm_class]
    weights = {k: v for k, v in lm_weights(model.backbone).items() if k.startswith(prefix)}
    if model.pooler is not None:
        weights |= {
            "bert.pooler.dense.weight": model.pooler.weight,
            "bert.pooler.dense.bias": model.pooler.bias,
            "classifier.weight": model.score.weight,
            "classifier.bias": model.score.bias,
        }
    else:
        weights["score.weight"] = model.score.weight
    return class_name, weights


def hf_tokenizer(tokenizer: Tokenizer, cfg: ModelConfig, classifier: bool = False) -> Any:
    """The tokenizer as a ``PreTrainedTokenizerFast`` with its special tokens named.

    tinylm's tokenizers add no special tokens (the data pipeline does). transformers users
    expect the tokenizer to frame an encoder's input, so the encoder's gets BERT's
    ``[CLS] text [SEP]`` template (tinylm's training examples); ``add_special_tokens=False``
    gives tinylm's ids exactly. The decoder's encodes exactly as tinylm's, as GPT-2's does.
    """
    transformers = require_transformers()
    tokenizer = Tokenizer.from_str(tokenizer.to_str())  # a copy: the template is ours only
    specials = special_tokens_of(tokenizer)
    named = {
        "pad_token": specials.pad,
        "eos_token": specials.eos,
        "cls_token": specials.cls,
        "sep_token": specials.sep,
        "mask_token": specials.mask,
    }
    if tokenizer.token_to_id("[UNK]") is not None:
        named["unk_token"] = "[UNK]"
    if cfg.arch == "encoder":
        cls, sep = specials.cls, specials.sep
        second = ":1" if cfg.type_vocab_size > 1 else ""  # one token type: segment 0 only
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{cls} $A {sep}",
            pair=f"{cls} $A {sep} $B{second} {sep}{second}",
            special_tokens=[(cls, specials.cls_id), (sep, specials.sep_id)],
        )
    else:
        named["bos_token"] = specials.eos
        if classifier:  # fine-tuning read `a EOS` and `a EOS b EOS` (data/classification.py)
            eos = specials.eos
            tokenizer.post_processor = processors.TemplateProcessing(
                single=f"$A {eos}",
                pair=f"$A {eos} $B {eos}",
                special_tokens=[(eos, specials.eos_id)],
            )
    # Batched generation wants the prompts' last tokens aligned, as Decoder.generate does; a
    # classifier reads right-padded rows, whose positions padding does not shift.
    left = cfg.arch == "decoder" and not classifier
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        model_max_length=cfg.max_seq_len,
        padding_side="left" if left else "right",
        **named,
    )


def export_hf(loaded: LoadedCheckpoint, out_dir: str | Path, overwrite: bool = False) -> Path:
    """Write the checkpoint as a transformers folder: config.json, model.safetensors,
    generation_config.json (decoder), tokenizer.json, tokenizer_config.json and
    special_tokens_map.json. The folder appears whole or not at all; an existing one is
    replaced only with ``overwrite``."""
    out_dir = Path(out_dir)
    check_output_free(out_dir, overwrite)
    require_transformers()
    tokenizer = tokenizer_from_json(loaded.tokenizer_json)
    classifier = isinstance(loaded.model, SequenceClassifier)
    labels = (loaded.hparams["classifier"]["label_names"] or None) if classifier else None
    hf_model = to_hf_model(loaded.model, tokenizer, labels)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        hf_model.save_pretrained(staging)
        hf_tokenizer(tokenizer, loaded.config, classifier).save_pretrained(staging)
        if out_dir.exists():  # overwrite=True: swap, then drop the old folder
            old = staging.with_name(staging.name + ".old")
            out_dir.rename(old)
            staging.rename(out_dir)
            if old.is_dir():
                shutil.rmtree(old)
            else:
                old.unlink()
        else:
            staging.rename(out_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return out_dir
