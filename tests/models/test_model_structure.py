"""Model structure: parameter counts against a hand count, weight tying, shapes, token types, init.

Tiny CPU models (``tests/tiny_models.py``), seeded, a few seconds."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from models.config import ModelConfig
from models.transformer import build_model
from tests.tiny_models import VOCAB, tiny_config, tiny_model


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def expected_parameters(cfg: ModelConfig, exclude_embeddings: bool = False) -> int:
    """Hand count of the architecture described in models/transformer.py."""
    C, V, T, L = cfg.hidden_size, cfg.vocab_size, cfg.max_seq_len, cfg.num_layers
    mlp_width = cfg.mlp_size
    layer_norm = 2 * C
    token = V * C
    position = T * C if cfg.position == "learned" else 0  # sinusoidal and rope: buffers
    token_type = cfg.type_vocab_size * C
    embeddings = token + position + token_type + (layer_norm if cfg.norm == "post" else 0)
    qkv = C + 2 * (cfg.num_kv_heads or cfg.num_heads) * (C // cfg.num_heads)  # q, k, v widths
    attention = C * qkv + (qkv if cfg.qkv_bias else 0) + C * C + C  # qkv + out_proj
    mlp = C * mlp_width + mlp_width + mlp_width * C + C
    block = attention + mlp + 2 * layer_norm
    final_norm = layer_norm if cfg.norm == "pre" else 0
    untied_projection = 0 if cfg.tie_embeddings else V * C
    if cfg.arch == "decoder":
        head = untied_projection  # no bias
    else:
        head = C * C + C + layer_norm + V + untied_projection  # dense, norm, own vocab bias
    total = embeddings + L * block + final_norm + head
    if exclude_embeddings:
        total -= position + token_type + (0 if cfg.tie_embeddings else token)
    return total


COUNT_CASES = [
    dict(arch="decoder"),
    dict(arch="decoder", norm="post", tie_embeddings=False, qkv_bias=False, position="sinusoidal"),
    dict(arch="encoder", type_vocab_size=2),
    dict(
        arch="encoder",
        norm="pre",
        tie_embeddings=False,
        position="sinusoidal",
        intermediate_size=48,
    ),
    dict(arch="decoder", position="rope", num_kv_heads=2),
    dict(arch="encoder", position="rope", num_kv_heads=1),
]


@pytest.mark.parametrize("overrides", COUNT_CASES)
def test_parameter_count_matches_hand_count(overrides: dict[str, Any]) -> None:
    cfg = tiny_config(**overrides)
    model = build_model(cfg)
    assert model.num_parameters() == expected_parameters(cfg)
    assert model.num_parameters(exclude_embeddings=True) == expected_parameters(cfg, True)
    n = expected_parameters(cfg, True)
    context = cfg.max_seq_len
    assert model.flops_per_token() == 6 * n + 12 * cfg.num_layers * cfg.hidden_size * context
    assert model.flops_per_token(seq_len=4) == 6 * n + 12 * cfg.num_layers * cfg.hidden_size * 4


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_weight_tying_shares_storage(arch: str) -> None:
    tied, untied = tiny_model(arch), tiny_model(arch, tie_embeddings=False)
    head = (lambda m: m.lm_head) if arch == "decoder" else (lambda m: m.mlm_head.proj)
    token = tied.embeddings.token.weight
    assert head(tied).weight.data_ptr() == token.data_ptr()
    assert head(untied).weight.data_ptr() != untied.embeddings.token.weight.data_ptr()
    # One update reaches both uses of the shared matrix.
    with torch.no_grad():
        token[3].fill_(1.0)
    assert torch.equal(head(tied).weight[3], torch.ones(32))


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_shapes(arch: str) -> None:
    model = tiny_model(arch)
    ids = torch.randint(0, VOCAB, (3, 11))
    logits = model(ids)
    assert isinstance(logits, torch.Tensor) and logits.shape == (3, 11, VOCAB)
    with pytest.raises(ValueError, match="exceeds max_seq_len=16; crop"):
        model(torch.randint(0, VOCAB, (1, 17)))
    with pytest.raises(ValueError, match=r"attention_mask has shape \(3, 10\)"):
        model(ids, torch.ones(3, 10, dtype=torch.long))


def test_token_type_ids() -> None:
    model = tiny_model("encoder", type_vocab_size=2)
    ids = torch.randint(0, VOCAB, (2, 6))
    zeros = torch.zeros_like(ids)
    torch.testing.assert_close(model(ids), model(ids, token_type_ids=zeros))
    assert not torch.allclose(model(ids), model(ids, token_type_ids=torch.ones_like(ids)))
    with pytest.raises(ValueError, match="type_vocab_size=0"):
        tiny_model("encoder")(ids, token_type_ids=zeros)


def test_init_follows_gpt2() -> None:
    model = tiny_model("decoder", hidden_size=64, num_layers=4)
    block = model.blocks[0]
    residual_std = 0.02 / math.sqrt(2 * 4)
    assert block.attn.out_proj.weight.std().item() == pytest.approx(residual_std, rel=0.1)
    assert block.mlp.fc2.weight.std().item() == pytest.approx(residual_std, rel=0.1)
    assert block.mlp.fc1.weight.std().item() == pytest.approx(0.02, rel=0.1)
    assert model.embeddings.token.weight.std().item() == pytest.approx(0.02, rel=0.1)
    assert torch.count_nonzero(block.attn.qkv_proj.bias) == 0
    assert torch.equal(block.attn_norm.weight, torch.ones(64))
    # BERT does not scale the residual projections.
    encoder = tiny_model("encoder", hidden_size=64, num_layers=4)
    assert encoder.blocks[0].mlp.fc2.weight.std().item() == pytest.approx(0.02, rel=0.1)
