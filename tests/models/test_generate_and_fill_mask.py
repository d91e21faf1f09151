"""Decoder.generate (batched, cached, windowed, EOS, argument checks) and Encoder.fill_mask.

Tiny CPU models (``tests/tiny_models.py``), seeded, a few seconds."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from models.transformer import Decoder, MaskPrediction, build_model
from tests.tiny_models import VARIANTS, VOCAB, tiny_config, tiny_model


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def greedy_reference(model: Decoder, ids: torch.Tensor, steps: int) -> torch.Tensor:
    """The obvious loop: full forward over the last max_seq_len tokens, argmax."""
    window = model.config.max_seq_len
    with torch.no_grad():
        for _ in range(steps):
            next_id = model(ids[:, -window:])[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, next_id], dim=1)
    return ids


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("use_cache", [True, False])
def test_batched_left_padded_generation_equals_one_by_one(
    use_cache: bool, variant: dict[str, Any]
) -> None:
    model = tiny_model("decoder", **variant)
    prompts = [torch.randint(0, VOCAB, (n,)) for n in (3, 7, 5)]
    width = max(len(p) for p in prompts)
    batch = torch.zeros(3, width, dtype=torch.long)
    mask = torch.zeros(3, width, dtype=torch.long)
    for row, prompt in enumerate(prompts):
        batch[row, width - len(prompt) :] = prompt
        mask[row, width - len(prompt) :] = 1
    out = model.generate(batch, 8, temperature=0, attention_mask=mask, use_cache=use_cache)
    assert out.shape == (3, width + 8)
    for row, prompt in enumerate(prompts):
        alone = model.generate(prompt[None], 8, temperature=0, use_cache=use_cache)
        assert torch.equal(out[row, width:], alone[0, len(prompt) :])
        assert torch.equal(alone, greedy_reference(model, prompt[None], 8))


@pytest.mark.parametrize(
    "sampling",
    [
        dict(temperature=0.0),
        dict(temperature=1.0),
        dict(temperature=0.8, top_k=5),
        dict(temperature=1.0, top_p=0.9),
        dict(temperature=1.5, top_k=100, top_p=0.5),
    ],
)
@pytest.mark.parametrize("variant", VARIANTS[1:])
def test_cached_and_uncached_generation_agree(
    sampling: dict[str, Any], variant: dict[str, Any]
) -> None:
    model = tiny_model("decoder", **variant)
    prompt = torch.randint(0, VOCAB, (2, 4))
    outs = [
        model.generate(
            prompt, 10, use_cache=use_cache, generator=torch.Generator().manual_seed(7), **sampling
        )
        for use_cache in (True, False)
    ]
    assert torch.equal(outs[0], outs[1])
    assert torch.equal(outs[0][:, :4], prompt)


@pytest.mark.parametrize("use_cache", [True, False])
def test_generation_runs_past_max_seq_len(use_cache: bool) -> None:
    model = tiny_model("decoder")  # max_seq_len=16
    prompt = torch.randint(0, VOCAB, (2, 5))
    out = model.generate(prompt, 30, temperature=0, use_cache=use_cache)
    assert out.shape == (2, 35)
    assert torch.equal(out, greedy_reference(model, prompt, 30))


def test_long_prompt_is_cropped_with_a_warning() -> None:
    model = tiny_model("decoder")
    prompt = torch.randint(0, VOCAB, (1, 20))
    with pytest.warns(UserWarning, match="longer than max_seq_len=16; the model sees only"):
        cached = model.generate(prompt, 4, temperature=0)
    with pytest.warns(UserWarning):
        uncached = model.generate(prompt, 4, temperature=0, use_cache=False)
    assert torch.equal(cached[:, :20], prompt)  # the whole prompt comes back
    assert torch.equal(cached, uncached)
    assert torch.equal(cached, greedy_reference(model, prompt, 4))


def test_generation_pads_after_eos_and_restores_training_mode() -> None:
    model = build_model(tiny_config("decoder", pad_token_id=0)).train()
    prompt = torch.randint(1, VOCAB, (2, 4))
    free = model.generate(prompt, 6, temperature=0)
    assert model.training  # restored
    eos = free[0, 5].item()  # row 0's second new token
    out = model.generate(prompt, 6, temperature=0, eos_token_id=eos)
    first_eos = (out[0, 4:] == eos).nonzero()[0].item() + 4
    assert torch.equal(out[0, : first_eos + 1], free[0, : first_eos + 1])
    assert (out[0, first_eos + 1 :] == 0).all()
    assert not out.requires_grad


def test_generation_stops_when_every_row_finished() -> None:
    model = tiny_model("decoder")
    prompt = torch.randint(0, VOCAB, (1, 4))
    eos = model.generate(prompt, 1, temperature=0)[0, -1].item()
    assert model.generate(prompt, 10, temperature=0, eos_token_id=eos).shape == (1, 5)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(temperature=-1.0), "temperature=-1.0 must be a finite number >= 0"),
        (dict(top_k=-1), "top_k=-1 must be None or 0"),
        (dict(top_p=0.0), r"top_p=0.0 must be in \(0, 1\]"),
        (dict(top_p=1.5), r"top_p=1.5 must be in \(0, 1\]"),
        (dict(max_new_tokens=-2), "max_new_tokens=-2 must be an int >= 0"),
        (dict(eos_token_id=VOCAB), "eos_token_id=37 is outside the vocabulary"),
        (dict(attention_mask=torch.tensor([[1, 1, 0]])), "needs left-padded prompts"),
    ],
)
def test_generation_rejects_invalid_arguments(kwargs: dict[str, Any], match: str) -> None:
    model = tiny_model("decoder")
    kwargs = dict(max_new_tokens=3) | kwargs
    with pytest.raises(ValueError, match=match):
        model.generate(torch.randint(0, VOCAB, (1, 3)), **kwargs)


def test_top_k_one_and_tiny_top_p_are_greedy() -> None:
    model = tiny_model("decoder")
    prompt = torch.randint(0, VOCAB, (2, 4))
    greedy = model.generate(prompt, 6, temperature=0)
    assert torch.equal(model.generate(prompt, 6, top_k=1), greedy)
    assert torch.equal(model.generate(prompt, 6, top_p=1e-6), greedy)


# ---------------------------------------------------------------------------------------------
# Fill-mask


def test_fill_mask() -> None:
    mask_id = VOCAB - 1
    model = tiny_model("encoder").train()
    ids = torch.randint(0, mask_id, (2, 8))
    ids[0, [2, 5]] = mask_id
    ids[1, 1] = mask_id
    ids[1, 7] = mask_id  # in the padding: ignored
    attention_mask = torch.tensor([[1] * 8, [1] * 6 + [0] * 2])
    result = model.fill_mask(ids, mask_id, attention_mask, top_k=4)
    assert model.training  # restored
    assert [[p.position for p in row] for row in result] == [[2, 5], [1]]
    with torch.no_grad():
        model.eval()
        expected = model(ids, attention_mask).softmax(-1)
    for row, predictions in enumerate(result):
        for pred in predictions:
            assert isinstance(pred, MaskPrediction)
            assert len(pred.token_ids) == len(pred.probs) == 4
            assert pred.probs == sorted(pred.probs, reverse=True)
            assert sum(pred.probs) <= 1.0 + 1e-6
            assert pred.token_ids[0] == expected[row, pred.position].argmax().item()
            assert pred.probs[0] == pytest.approx(expected[row, pred.position].max().item())
    everything = model.fill_mask(ids, mask_id, attention_mask, top_k=1000)  # clamped to V
    assert sum(everything[0][0].probs) == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ValueError, match="top_k=0 must be a positive int"):
        model.fill_mask(ids, mask_id, top_k=0)
