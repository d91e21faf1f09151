"""What the modes that run a trained network share: its checkpoints, tokenizer and prompt."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer

from analysis.records import natural_key
from conf.schema import JobConfig, Settings
from data.tokenizer import special_tokens_of, tokenizer_from_json
from models.transformer import Decoder, Encoder
from training.checkpoint import (
    LoadedCheckpoint,
    check_no_model_overrides,
    check_not_hf_export,
    load_checkpoint,
)


def load_for_inference(
    settings: Settings, checkpoint: dict[str, Any] | None = None
) -> tuple[LoadedCheckpoint, Tokenizer]:
    """The checkpoint ``ckpt_path`` names (network in eval mode on the CPU; ``checkpoint``: its
    contents, when read already) and its tokenizer; model.* overrides are refused."""
    loaded = load_checkpoint(settings.job.ckpt_path, settings.job.mode, checkpoint)
    check_no_model_overrides(settings, loaded.hparams["model_config"], loaded.path)
    return loaded, tokenizer_from_json(loaded.tokenizer_json)


def checkpoints_to_evaluate(target: Path) -> list[Path]:
    """A checkpoint file; a run directory's best.ckpt; or every run's best.ckpt below a sweep
    directory, in job order."""
    if target.is_file():
        return [target]
    if not target.is_dir():
        raise FileNotFoundError(f"ckpt_path={target} does not exist")
    check_not_hf_export(target)
    own = target / "checkpoints" / "best.ckpt"
    if own.is_file():
        return [own]
    found = sorted(
        target.glob("*/checkpoints/best.ckpt"), key=lambda p: natural_key(p.parent.parent.name)
    )
    if not found:
        raise FileNotFoundError(
            f"no checkpoints/best.ckpt in {target} or in its run directories; pass a "
            "checkpoint file, a run directory or a sweep directory"
        )
    return found


def encode_prompt(tokenizer: Tokenizer, prompt: str, context: int) -> list[int]:
    """The prompt's token ids, all of them; unknown characters and a prompt longer than
    ``context`` are said on stderr, one line each."""
    if not prompt:
        return []
    encoding = tokenizer.encode(prompt)
    ids = encoding.ids
    unk_id = tokenizer.token_to_id("[UNK]")
    if unk_id is not None and unk_id in ids:
        unknown = sorted(
            {prompt[a:b] for i, (a, b) in zip(ids, encoding.offsets, strict=True) if i == unk_id}
        )
        print(
            f"tinylm: the tokenizer does not know {', '.join(map(repr, unknown))} in the "
            "prompt; they are read as [UNK] and left out of the output",
            file=sys.stderr,
        )
    if len(ids) > context:
        print(
            f"tinylm: the prompt has {len(ids)} tokens, more than the context of {context}; "
            f"the model reads its last {context}",
            file=sys.stderr,
        )
    return ids


def generate_text(model: Decoder, tokenizer: Tokenizer, job: JobConfig, prompt: str) -> str:
    """The prompt and its continuation, sampled as ``job`` says (seeded by ``job.seed``)."""
    ids = encode_prompt(tokenizer, prompt, model.config.max_seq_len)
    if not ids:  # an empty prompt starts a fresh document
        ids = [special_tokens_of(tokenizer).eos_id]
    generator = torch.Generator().manual_seed(job.seed)
    with warnings.catch_warnings():  # the long-prompt warning: said above, in one line
        warnings.simplefilter("ignore")
        out = model.generate(
            torch.tensor([ids]),
            max_new_tokens=job.max_new_tokens,
            temperature=job.temperature,
            top_k=job.top_k or None,
            top_p=job.top_p,
            generator=generator,
            eos_token_id=None,
        )
    return tokenizer.decode(out[0].tolist(), skip_special_tokens=True)


def fill_mask_text(model: Encoder, tokenizer: Tokenizer, prompt: str | None) -> str:
    """The prompt, then the five likeliest tokens for each of its mask tokens."""
    specials = special_tokens_of(tokenizer)
    prompt = prompt or f"The {specials.mask} of the function is returned."
    if specials.mask not in prompt:
        raise ValueError(
            f"prompt={prompt!r} has no {specials.mask} token to fill; an encoder fills masks, "
            f'e.g. prompt="The {specials.mask} is returned."'
        )
    # The encoder was trained on [CLS] ... [SEP] examples; the tokenizer adds neither.
    ids = [specials.cls_id, *tokenizer.encode(prompt).ids, specials.sep_id]
    results = model.fill_mask(torch.tensor([ids]), specials.mask_id, top_k=5)
    lines = [prompt]
    for number, prediction in enumerate(results[0], start=1):
        guesses = ", ".join(
            f"{tokenizer.id_to_token(i)!r} {p:.2f}"
            for i, p in zip(prediction.token_ids, prediction.probs, strict=True)
        )
        lines.append(f"  {specials.mask} #{number}: {guesses}")
    return "\n".join(lines)


def sample_text(
    model: Encoder | Decoder, tokenizer: Tokenizer, job: JobConfig, default_prompt: str = ""
) -> str:
    """A decoder's continuation of ``job.prompt`` (else ``default_prompt``), or an encoder's
    fill-mask."""
    if isinstance(model, Decoder):
        return generate_text(model, tokenizer, job, job.prompt or default_prompt)
    return fill_mask_text(model, tokenizer, job.prompt)
