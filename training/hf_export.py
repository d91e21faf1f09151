"""A tinylm network as a Hugging Face ``transformers`` folder, loadable without tinylm: the
model its family (``training.hf_families``) describes, the tokenizer, the folder written whole.
``transformers`` (the optional ``hf`` extra) is imported here only, when asked for.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, processors

from data.tokenizer import special_tokens_of, tokenizer_from_json
from models.config import ModelConfig
from models.mup import fold_into_standard
from models.transformer import Decoder, Encoder, build_model
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


def to_hf_model(model: Encoder | Decoder, tokenizer: Tokenizer) -> Any:
    """The family's transformers model (eval mode, CPU, fp32) computing what ``model``
    computes (μP's multipliers folded into the weights); a setting it cannot reproduce is
    refused first, by name."""
    if model.config.parametrization == "mup":
        standard, state = fold_into_standard(model.config, model.state_dict())
        model = build_model(standard)
        model.load_state_dict(state)
    family = hf_family(model.config)
    family.check(model.config)
    kwargs = family.config_kwargs(model.config, special_tokens_of(tokenizer))
    return filled_hf_model(family.config_class, family.model_class, kwargs, family.weights(model))


def filled_hf_model(
    config_class: str, class_name: str, kwargs: dict[str, Any], mapped: dict[str, torch.Tensor]
) -> Any:
    """transformers' ``class_name`` of ``config_class(**kwargs)``, every parameter copied from
    ``mapped`` (by transformers' names), in eval mode."""
    transformers = require_transformers()
    config = getattr(transformers, config_class)(**kwargs)
    cls = getattr(transformers, class_name)
    hf_model = cls(config)
    params = dict(hf_model.named_parameters(remove_duplicate=False))
    if params.keys() != mapped.keys():
        # A transformers release that renames or adds parameters: say which, do not guess.
        missing = sorted(params.keys() - mapped.keys())
        extra = sorted(mapped.keys() - params.keys())
        raise RuntimeError(
            f"transformers {transformers.__version__} lays out {cls.__name__} differently: "
            f"unmapped {missing}, unknown {extra}"
        )
    with torch.no_grad():
        for name, param in params.items():
            param.copy_(mapped[name].float())
    return hf_model.eval()


def hf_tokenizer(tokenizer: Tokenizer, cfg: ModelConfig, padding_side: str | None = None) -> Any:
    """The tokenizer as a ``PreTrainedTokenizerFast`` with its special tokens named (padding
    on ``padding_side``; None: the language model's).

    tinylm's tokenizers add no special tokens (the data pipeline does), but transformers users
    expect an encoder's tokenizer to frame its input: it gets BERT's ``[CLS] text [SEP]``
    template (``add_special_tokens=False`` gives tinylm's ids). A decoder's, as GPT-2's, adds
    none.
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
    # Batched generation wants the prompts' last tokens aligned, as Decoder.generate does.
    language_model_side = "left" if cfg.arch == "decoder" else "right"
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        model_max_length=cfg.max_seq_len,
        padding_side=padding_side or language_model_side,
        **named,
    )


def export_hf(loaded: LoadedCheckpoint, out_dir: str | Path, overwrite: bool = False) -> Path:
    """Write a language-model checkpoint as a transformers folder (``write_hf_folder``)."""
    out_dir = Path(out_dir)
    check_output_free(out_dir, overwrite)
    tokenizer = tokenizer_from_json(loaded.tokenizer_json)
    hf_model = to_hf_model(loaded.model, tokenizer)
    return write_hf_folder(hf_model, hf_tokenizer(tokenizer, loaded.config), out_dir)


def write_hf_folder(hf_model: Any, hf_tok: Any, out_dir: Path) -> Path:
    """The model's and the tokenizer's files in ``out_dir``, which appears whole or not at
    all; one already there (the caller's ``overwrite``) is replaced."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        hf_model.save_pretrained(staging)
        hf_tok.save_pretrained(staging)
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
