"""μP (``model.parametrization=mup``): the base width is the standard parametrization, the
init, attention and readout scale with the width multiplier as mup's rules say, and the
multipliers fold into a standard network's weights with the same logits."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from models.config import ModelConfig
from models.mup import fold_into_standard
from models.transformer import build_model
from tests.tiny_models import VOCAB, tiny_config

IDS = torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(3))


def mup_config(arch: str = "decoder", **overrides) -> ModelConfig:
    return tiny_config(arch, **({"parametrization": "mup"} | overrides))


def seeded(cfg: ModelConfig) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(cfg).eval()


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_at_the_base_width_mup_is_the_standard_parametrization(arch: str) -> None:
    standard = tiny_config(arch)
    mup = mup_config(arch, mup_base_width=standard.hidden_size, mup_zero_init=False)
    assert mup.width_multiplier == 1.0 and mup.attention_scale is None
    assert torch.equal(seeded(standard)(IDS), seeded(mup)(IDS))


def test_the_width_multiplier_and_attention_scale() -> None:
    cfg = mup_config(hidden_size=64, num_heads=4, mup_base_width=16)
    assert cfg.width_multiplier == 4.0
    # sqrt(D_base) / D: 1 / D up to the base's constant, 1 / sqrt(D) at the base
    assert cfg.attention_scale == pytest.approx(math.sqrt(16 / 4) / 16)
    assert tiny_config(hidden_size=64).width_multiplier == 1.0  # standard: nothing scales


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_hidden_matrices_init_shrinks_with_width_and_the_rest_does_not(arch: str) -> None:
    def stds(width: int) -> tuple[float, float]:
        model = seeded(mup_config(arch, hidden_size=width, mup_base_width=32, mup_zero_init=False))
        hidden = torch.cat([p.flatten() for p in model.hidden_matrices()])
        return hidden.std().item(), model.embeddings.token.weight.std().item()

    (hidden_32, table_32), (hidden_128, table_128) = stds(32), stds(128)
    assert hidden_128 / hidden_32 == pytest.approx(0.5, rel=0.05)  # 1 / sqrt(m), m = 4
    assert table_128 / table_32 == pytest.approx(1.0, rel=0.05)


def test_hidden_matrices_are_those_growing_with_width_in_both_dimensions() -> None:
    for arch in ("decoder", "encoder"):
        model = seeded(mup_config(arch))
        width = model.config.hidden_size
        shapes = {tuple(p.shape) for p in model.hidden_matrices()}
        assert all(VOCAB not in shape and width in shape for shape in shapes)
        named = {id(p) for p in model.hidden_matrices()}
        others = [n for n, p in model.named_parameters() if p.dim() == 2 and id(p) not in named]
        assert all(n.startswith(("embeddings.", "lm_head", "mlm_head.proj")) for n in others)


@pytest.mark.parametrize("tie", [True, False])
def test_zero_init_zeroes_the_queries_and_an_untied_readout(tie: bool) -> None:
    model = seeded(mup_config(tie_embeddings=tie, mup_base_width=16))
    width = model.config.hidden_size
    for block in model.blocks:
        rows = block.attn.qkv_proj.weight
        assert rows[:width].abs().max() == 0 and rows[width:].abs().max() > 0
    readout = model.lm_head.weight
    assert (readout.abs().max() == 0) is not tie  # tied: it is the input table, kept


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_the_readout_reads_its_input_divided_by_the_multiplier(arch: str) -> None:
    cfg = mup_config(arch, hidden_size=64, mup_base_width=24, mup_zero_init=False)
    model = seeded(cfg)
    hidden = model.hidden_states(IDS)  # (B, T, C)
    if arch == "decoder":
        expected = model.lm_head(hidden / cfg.width_multiplier)
    else:
        head = model.mlm_head
        expected = head.proj(head.norm(head.act(head.dense(hidden))) / cfg.width_multiplier)
    torch.testing.assert_close(model(IDS), expected)


def test_mup_attention_scores_are_scaled_by_one_over_the_head_width() -> None:
    cfg = mup_config(hidden_size=64, num_heads=2, mup_base_width=16, mup_zero_init=False)
    model = seeded(cfg)
    attention = model.blocks[0].attn
    x = torch.randn(2, 12, 64, generator=torch.Generator().manual_seed(4))
    _, probs = attention(x, causal=True, need_weights=True)
    q, k, _ = attention.qkv_proj(x).split(64, dim=-1)
    q, k = (t.view(2, 12, 2, 32).transpose(1, 2) for t in (q, k))  # (B, H, T, D)
    scores = q @ k.transpose(-2, -1) * math.sqrt(8) / 32  # sqrt(D_base) / D
    scores = scores.masked_fill(~torch.ones(12, 12, dtype=torch.bool).tril(), -math.inf)
    torch.testing.assert_close(probs, scores.softmax(-1))
    # The fast path (SDPA, given the scale) agrees with the plain one.
    fast = attention(x, causal=True)
    plain, _ = attention(x, causal=True, need_weights=True)
    torch.testing.assert_close(fast, plain)


FOLDED = [
    pytest.param("decoder", {}, id="pre_tied"),
    pytest.param("decoder", {"position": "rope", "tie_embeddings": False}, id="rope_untied"),
    pytest.param("decoder", {"norm": "post", "qkv_bias": False}, id="post_no_bias"),
    pytest.param("encoder", {"type_vocab_size": 2}, id="encoder"),
    pytest.param("encoder", {"norm": "pre", "tie_embeddings": False}, id="encoder_pre_untied"),
    pytest.param(
        "decoder",
        {"mup_output_multiplier": 3.0, "mup_attention_multiplier": 0.7},
        id="multipliers",
    ),
]


@pytest.mark.parametrize(("arch", "settings"), FOLDED)
def test_folding_into_the_standard_parametrization_keeps_the_logits(arch, settings) -> None:
    cfg = mup_config(arch, hidden_size=60, num_heads=3, mup_base_width=24, **settings)
    model = seeded(cfg)
    with torch.no_grad():  # trained-looking weights: no zero queries, nothing symmetric
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    standard, state = fold_into_standard(cfg, model.state_dict())
    assert standard == dataclasses.replace(cfg, parametrization="standard")
    folded = build_model(standard).eval()
    folded.load_state_dict(state)
    torch.testing.assert_close(folded(IDS), model(IDS), rtol=0, atol=1e-5)
    # The multipliers matter here (the test can fail): unfolded weights give other logits.
    unfolded = build_model(standard).eval()
    unfolded.load_state_dict(before)
    assert (unfolded(IDS) - model(IDS)).abs().max() > 1e-3
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_the_multipliers_scale_the_readout_and_the_scores(arch: str) -> None:
    cfg = mup_config(
        arch,
        hidden_size=64,
        mup_base_width=16,
        mup_output_multiplier=2.5,
        mup_attention_multiplier=0.5,
    )
    assert cfg.readout_multiplier == 2.5 / 4
    assert cfg.attention_scale == pytest.approx(0.5 * math.sqrt(16 / 4) / 16)
    # At the base width the multipliers alone still act: μP is then not the standard one.
    base = mup_config(arch, mup_base_width=32, mup_attention_multiplier=2.0)
    assert base.attention_scale == pytest.approx(2.0 / math.sqrt(8))
    model = seeded(cfg)
    hidden = model.hidden_states(IDS)  # (B, T, C)
    if arch == "decoder":
        expected = model.lm_head(hidden * 2.5 / 4)
    else:
        head = model.mlm_head
        expected = head.proj(head.norm(head.act(head.dense(hidden))) * 2.5 / 4)
    torch.testing.assert_close(model(IDS), expected)
    assert model.blocks[0].attn.scale == cfg.attention_scale
    # Under the standard parametrization they are not read (a sweep over both may set them).
    standard = tiny_config(arch, mup_output_multiplier=2.5, mup_attention_multiplier=0.5)
    assert standard.readout_multiplier == 1.0 and standard.attention_scale is None


def test_mup_settings_are_checked() -> None:
    with pytest.raises(ValueError, match=r"parametrization='mu' is unknown; .*standard, mup"):
        tiny_config(parametrization="mu")
    with pytest.raises(ValueError, match="mup_base_width=0 must be a positive integer"):
        tiny_config(mup_base_width=0)
    with pytest.raises(ValueError, match=r"mup_output_multiplier=0.0 must be > 0, e.g. 1.0"):
        tiny_config(mup_output_multiplier=0.0)
    with pytest.raises(ValueError, match=r"mup_attention_multiplier=-1.0 must be > 0"):
        tiny_config(mup_attention_multiplier=-1.0)
