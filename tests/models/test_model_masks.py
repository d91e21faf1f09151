"""Masks and caches: causality, padding, KV-cache chunks, attention outputs.

Tiny CPU models (``tests/tiny_models.py``), seeded, a few seconds."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from models.config import ModelConfig
from models.transformer import ModelOutput, build_model
from tests.tiny_models import VARIANTS, VOCAB, tiny_config, tiny_model


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("output_attentions", [False, True])  # SDPA path and plain path
def test_decoder_future_tokens_never_change_the_past(
    output_attentions: bool, variant: dict[str, Any]
) -> None:
    model = tiny_model("decoder", **variant)
    ids = torch.randint(0, VOCAB, (2, 12))

    def logits_of(x: torch.Tensor) -> torch.Tensor:
        out = model(x, output_attentions=output_attentions)
        return out.logits if output_attentions else out

    base = logits_of(ids)
    for t in range(11):
        changed = ids.clone()
        changed[:, t + 1 :] = (changed[:, t + 1 :] + 1) % VOCAB
        logits = logits_of(changed)
        torch.testing.assert_close(logits[:, : t + 1], base[:, : t + 1], rtol=0, atol=1e-5)
        assert not torch.allclose(logits[:, t + 1], base[:, t + 1], atol=1e-4)  # can fail


@pytest.mark.parametrize(
    "overrides",
    [
        dict(),
        dict(norm="pre", position="sinusoidal", type_vocab_size=2),
        dict(position="rope", num_kv_heads=2),
    ],
)
def test_encoder_padding_does_not_change_real_tokens(overrides: dict[str, Any]) -> None:
    model = tiny_model("encoder", **overrides)
    ids = torch.randint(0, VOCAB, (1, 5))
    alone = model(ids, torch.ones(1, 5, dtype=torch.long))
    padded = torch.cat([ids, torch.randint(0, VOCAB, (1, 4))], dim=1)  # junk in the padding
    mask = torch.tensor([[1] * 5 + [0] * 4])
    torch.testing.assert_close(model(padded, mask)[:, :5], alone, rtol=0, atol=1e-5)
    # Without the mask the junk is attended to, so the check above can fail.
    assert not torch.allclose(model(padded)[:, :5], alone, atol=1e-3)


@pytest.mark.parametrize("variant", VARIANTS)
def test_decoder_left_padding_gets_unpadded_positions(variant: dict[str, Any]) -> None:
    model = tiny_model("decoder", **variant)
    ids = torch.randint(0, VOCAB, (1, 6))
    padded = torch.cat([torch.randint(0, VOCAB, (1, 3)), ids], dim=1)
    mask = torch.tensor([[0, 0, 0] + [1] * 6])
    torch.testing.assert_close(model(padded, mask)[:, 3:], model(ids), rtol=0, atol=1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("padding", [False, True])
@pytest.mark.parametrize("chunks", [[1] * 9, [4, 3, 2]], ids=["tokens", "chunks"])
def test_kv_cache_chunks_match_the_full_pass(
    chunks: list[int], padding: bool, variant: dict[str, Any]
) -> None:
    model = tiny_model("decoder", **variant)
    ids = torch.randint(0, VOCAB, (2, 9))
    mask = torch.tensor([[1] * 9, [0] * 3 + [1] * 6]) if padding else None  # left padding
    full = model(ids, mask)  # (B, T, V)
    caches = model.init_caches(2)
    pieces, start = [], 0
    for size in chunks:
        end = start + size
        step_mask = None if mask is None else mask[:, :end]  # covers the cached tokens too
        pieces.append(model(ids[:, start:end], step_mask, kv_caches=caches))
        start = end
    # The cache holds the key/value heads only.
    assert caches[0].keys.shape[1] == (variant.get("num_kv_heads") or 4)
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=0, atol=1e-5)


def test_checkpoint_without_num_kv_heads_loads_to_the_same_logits() -> None:
    """Configs saved before num_kv_heads existed lack the key: the default is multi-head."""
    model = tiny_model("decoder")
    old = model.config.to_dict()
    del old["num_kv_heads"]
    ids = torch.randint(0, VOCAB, (2, 9))
    for restored_config in (ModelConfig.from_dict(old), tiny_config(num_kv_heads=4)):
        restored = build_model(restored_config).eval()
        restored.load_state_dict(model.state_dict())
        torch.testing.assert_close(restored(ids), model(ids), rtol=0, atol=0)


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_output_attentions(arch: str) -> None:
    model = tiny_model(arch)
    ids = torch.randint(0, VOCAB, (2, 7))
    mask = torch.tensor([[1] * 7, [1] * 5 + [0] * 2]) if arch == "encoder" else None
    out = model(ids, mask, output_attentions=True)
    assert isinstance(out, ModelOutput)
    logits, attentions = out  # a NamedTuple unpacks too
    torch.testing.assert_close(logits, model(ids, mask), rtol=0, atol=1e-5)
    assert len(attentions) == 2
    for probs in attentions:
        assert probs.shape == (2, 4, 7, 7)
        torch.testing.assert_close(probs.sum(-1), torch.ones(2, 4, 7))
        if arch == "decoder":
            assert torch.count_nonzero(probs.triu(diagonal=1)) == 0
        else:
            assert torch.count_nonzero(probs[1, :, :, 5:]) == 0  # padded keys get nothing
