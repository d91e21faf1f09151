"""Learning: tiny models overfit a batch; the encoder uses right context the decoder cannot.

Tiny CPU models (``tests/tiny_models.py``), seeded, a few seconds."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from models.transformer import Decoder, Encoder
from tests.tiny_models import VOCAB, tiny_model


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def train(model: Encoder | Decoder, batches: Any, steps: int, lr: float = 3e-3) -> float:
    """Adam on cross-entropy (-100 = no target); returns the last loss, stopping at 0.05."""
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss = torch.tensor(math.inf)
    for _ in range(steps):
        inputs, labels = batches()
        loss = F.cross_entropy(model(inputs).flatten(0, 1), labels.flatten(), ignore_index=-100)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss.item() < 0.05:
            break
    model.eval()
    return loss.item()


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_overfits_one_batch(arch: str) -> None:
    model = tiny_model(arch)
    ids = torch.randint(0, VOCAB - 1, (4, 16))
    if arch == "decoder":
        inputs, labels = ids[:, :-1], ids[:, 1:]
    else:
        masked = torch.rand(ids.shape) < 0.15
        inputs = ids.masked_fill(masked, VOCAB - 1)
        labels = ids  # reconstruct every token, masked ones included
    assert train(model, lambda: (inputs, labels), steps=300) < 0.05


def right_context_batch(n: int, length: int = 8, symbols: int = 8) -> tuple[torch.Tensor, ...]:
    """Random symbols where the token at a random position p equals the token after it.

    Returns (inputs with position p replaced by MASK = ``symbols``, p, the target x[p]).
    """
    x = torch.randint(0, symbols, (n, length))
    p = torch.randint(1, length - 1, (n,))
    rows = torch.arange(n)
    x[rows, p] = x[rows, p + 1]
    targets = x[rows, p]
    inputs = x.clone()
    inputs[rows, p] = symbols
    return inputs, p, targets


def test_encoder_uses_right_context_the_decoder_cannot_see() -> None:
    """x[p] is a copy of x[p + 1]: the encoder sees it, the decoder (predicting x[p] from
    x[< p]) can only guess among 8 symbols."""
    rows = torch.arange(64)

    def labels_at(positions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        labels = torch.full((64, 8), -100)
        labels[rows, positions] = targets
        return labels

    def encoder_batch() -> tuple[torch.Tensor, torch.Tensor]:
        inputs, p, targets = right_context_batch(64)
        return inputs, labels_at(p, targets)

    def decoder_batch() -> tuple[torch.Tensor, torch.Tensor]:
        inputs, p, targets = right_context_batch(64)
        return inputs, labels_at(p - 1, targets)  # the logits at p - 1 predict token p

    cfg = dict(vocab_size=9, max_seq_len=8)
    encoder, decoder = tiny_model("encoder", **cfg), tiny_model("decoder", **cfg)
    train(encoder, encoder_batch, steps=300)
    train(decoder, decoder_batch, steps=300)

    torch.manual_seed(1)  # held-out examples
    inputs, p, targets = right_context_batch(2000)
    eval_rows = torch.arange(2000)
    with torch.no_grad():
        encoder_accuracy = (encoder(inputs)[eval_rows, p].argmax(-1) == targets).float().mean()
        decoder_accuracy = (decoder(inputs)[eval_rows, p - 1].argmax(-1) == targets).float().mean()
    assert encoder_accuracy > 0.9
    assert decoder_accuracy < 0.25  # chance is 1/8
