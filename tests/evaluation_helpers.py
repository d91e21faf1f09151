"""What the ``mode=eval`` tests share (tests/modes/, and the features' evaluation tests):
checkpoints written without training (an untrained tiny network and a character tokenizer: a
second, not a training run), the settings and the call of ``modes.eval.run``, a recount of a
decoder's windows from the network's logits, and a stand-in that records a command's calls."""

from __future__ import annotations

import contextlib
import io
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import lightning as L
import torch

import modes.eval
from conf.hydra_runtime import parse_settings
from conf.schema import OptimConfig, Settings
from data.config import DataConfig
from data.tokenizer import special_tokens_of, train_tokenizer
from models.config import ModelConfig
from models.transformer import build_model
from tests.conftest import compose_config
from tests.tiny_models import tiny_config
from training.task import task_class

WINDOW = 16
OPTIM = OptimConfig(
    lr=1e-3, weight_decay=0.1, beta1=0.9, beta2=0.95, warmup_steps=1, min_lr_ratio=0.1
)


def untrained_checkpoint(
    path: Path, arch: str, paragraphs: list[str], step: int | None = 7
) -> Path:
    """An untrained tiny ``arch`` with a character tokenizer of ``paragraphs``, saved as a
    training run saves its checkpoints (state_dict, hyper_parameters, global_step; none
    when ``step`` is None)."""
    tokenizer = train_tokenizer("char", [paragraphs], 300)
    torch.manual_seed(0)
    task = task_class(arch)(
        model_config=tiny_config(
            arch, vocab_size=tokenizer.get_vocab_size(with_added_tokens=True), max_seq_len=WINDOW
        ),
        optim_config=OPTIM,
        tokenizer_json=tokenizer.to_str(),
        data_config=DataConfig(tokenizer="char"),
        chars_per_token={},
        total_steps=10,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"state_dict": task.state_dict(), "hyper_parameters": dict(task.hparams)}
    torch.save({**payload, **({} if step is None else {"global_step": step})}, path)
    return path


class EvaluationCounter(L.Callback):
    """Counts the evaluations a Trainer ran with it."""

    def __init__(self) -> None:
        self.count = 0

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.count += 1

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.count += 1


def eval_settings(target: Path, tmp_path: Path, *overrides: str) -> Settings:
    """``mode=eval`` on ``target`` with ``overrides`` recorded as Hydra records a command
    line's."""
    cfg = compose_config("mode=eval", f"ckpt_path={target}", f"output_dir={tmp_path}", *overrides)
    return replace(parse_settings(cfg), overrides=dict(o.split("=", 1) for o in overrides))


def windows_recount(
    ckpt: Path, paragraphs: list[str], stride: int, head_mask: torch.Tensor | None = None
) -> dict[str, float]:
    """Loss, accuracy and counts of the decoder in ``ckpt`` over the paragraphs as one stream
    (each followed by EOS), in windows of WINDOW targets sliding by ``stride``: the first
    window scores all its targets, the others their last ``stride``; ``head_mask`` [L, H]:
    the heads at 0 gated off."""
    from tokenizers import Tokenizer

    from training.checkpoint import load_checkpoint

    loaded = load_checkpoint(ckpt)
    tokenizer = Tokenizer.from_str(loaded.tokenizer_json)
    eos = special_tokens_of(tokenizer).eos_id
    stream = [t for p in paragraphs for t in (*tokenizer.encode(p).ids, eos)]
    nll, correct, scored, start = 0.0, 0, 0, 0
    with torch.no_grad():
        while start + WINDOW + 1 <= len(stream):
            block = torch.tensor(stream[start : start + WINDOW + 1])
            count = WINDOW if start == 0 else stride
            logits = loaded.model(block[None, :-1], head_mask=head_mask)[0, -count:].double()
            targets = block[1:][-count:]
            nll -= torch.log_softmax(logits, -1).gather(-1, targets[:, None]).sum().item()
            correct += int((logits.argmax(-1) == targets).sum())
            scored += count
            start += stride
    characters = sum(len(p) + 1 for p in paragraphs)
    utf8_bytes = sum(len(p.encode()) + 1 for p in paragraphs)  # one separator a document
    loss = nll / scored
    return {
        "loss": loss,
        "acc": correct / scored,
        "bpc": loss / math.log(2) / (characters / len(stream)),
        "bpb": loss / math.log(2) / (utf8_bytes / len(stream)),
        "bytes": utf8_bytes,
        "tokens_scored": scored,
        "tokens": len(stream),
        "characters": characters,
    }


def run_eval(settings: Settings, callbacks: Sequence[Any] = ()) -> tuple[dict[str, Any], list[str]]:
    """``modes.eval.run``'s result and the lines it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = modes.eval.run(settings, callbacks)
    return result, out.getvalue().splitlines()


def held_text(tmp_path: Path, paragraphs: list[str]) -> Path:
    held = tmp_path / "held.txt"
    held.write_text("\n\n".join(paragraphs) + "\n")
    return held


def with_weights_drawn_from(ckpt: Path, seed: int, path: Path) -> Path:
    """A copy of ``ckpt`` at ``path`` whose network is a fresh one of its shape drawn from
    ``seed`` (as ``eval.weights=untrained seed=SEED`` draws it)."""
    payload = torch.load(ckpt, weights_only=True)
    torch.manual_seed(seed)
    fresh = build_model(ModelConfig.from_dict(payload["hyper_parameters"]["model_config"]))
    for key, value in fresh.state_dict().items():
        assert f"model.{key}" in payload["state_dict"]
        payload["state_dict"][f"model.{key}"] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(payload, path)
    return path


def records_of(eval_jsonl: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in eval_jsonl.read_text().splitlines()]


class Calls:
    """A stand-in for a command: records the arguments of each call, then returns
    ``returned``, or what ``then`` (the real command, to spy on it) returns for them."""

    def __init__(self, returned: Any = None, then: Callable[..., Any] | None = None) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.returned = returned
        self.then = then

    def __call__(self, *args: Any) -> Any:
        self.calls.append(args)
        return self.then(*args) if self.then else self.returned
