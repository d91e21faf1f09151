"""A tinylm network as a Hugging Face ``transformers`` folder, loadable without tinylm.

The family (GPT-2, GPT-NeoX or BERT) is chosen once from the config; what it maps, refuses and
how it renames the weights lives in its entry in ``training.hf_families``. Here: the
transformers model built from that entry (checking that it lays out exactly the parameters the
entry fills), the tokenizer, and the folder, written whole.

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


def to_hf_model(model: Encoder | Decoder, tokenizer: Tokenizer) -> Any:
    """The family's transformers model (eval mode, CPU, fp32) computing what ``model``
    computes; a setting the family cannot reproduce is refused first, by name."""
    family = hf_family(model.config)
    family.check(model.config)
    kwargs = family.config_kwargs(model.config, special_tokens_of(tokenizer))
    return filled_hf_model(family.config_class, family.model_class, kwargs, family.weights(model))


def filled_hf_model(
    config_class: str, class_name: str, kwargs: dict[str, Any], mapped: dict[str, torch.Tensor]
) -> Any:
    """transformers' ``class_name`` built from ``config_class(**kwargs)``, every parameter
    copied from ``mapped`` (by transformers' names), in eval mode."""
    transformers = require_transformers()
    config = getattr(transformers, config_class)(**kwargs)
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


def hf_tokenizer(tokenizer: Tokenizer, cfg: ModelConfig, padding_side: str | None = None) -> Any:
    """The tokenizer as a ``PreTrainedTokenizerFast`` with its special tokens named (padding
    on ``padding_side``; None: the language model's).

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
    """config.json, model.safetensors, generation_config.json (decoder), tokenizer.json,
    tokenizer_config.json and special_tokens_map.json in ``out_dir``. The folder appears whole
    or not at all; one already there (the caller's ``overwrite``) is replaced."""
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
