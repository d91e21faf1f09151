"""The options of modded-nanogpt's speed runs (``ModelConfig``: ``qk_norm``, ``activation``,
``zero_init_residual``, ``logit_softcap``), each checked for what it claims. Their cache,
padding and generation paths run in every test of ``tests.tiny_models.VARIANTS``."""

from __future__ import annotations

import pytest
import torch

from models.attention import MultiHeadAttention
from models.transformer import ReLUSquared, soft_cap
from tests.tiny_models import VOCAB, tiny_config, tiny_model


def ids(batch: int = 2, length: int = 12) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(3))


def scaled_queries_and_keys(attention: MultiHeadAttention, factor: float) -> None:
    """Multiply the query and key rows of the fused projection (weights and biases)."""
    rows = attention.d_model + attention.num_kv_heads * attention.head_dim
    with torch.no_grad():
        attention.qkv_proj.weight[:rows] *= factor
        attention.qkv_proj.bias[:rows] *= factor


@pytest.mark.parametrize("need_weights", [False, True], ids=["sdpa", "plain"])
def test_qk_norm_makes_the_attention_blind_to_the_scale_of_queries_and_keys(
    need_weights: bool,
) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 9, 32)
    outputs = {}
    for qk_norm in (False, True):
        torch.manual_seed(1)
        attention = MultiHeadAttention(32, 4, qk_norm=qk_norm).eval()
        before = attention(x, causal=True, need_weights=need_weights)
        scaled_queries_and_keys(attention, 7.0)
        after = attention(x, causal=True, need_weights=need_weights)
        outputs[qk_norm] = (before, after)
    for normed_before, normed_after in zip(*(map(torch.atleast_1d, outputs[True])), strict=True):
        torch.testing.assert_close(normed_after, normed_before, atol=1e-5, rtol=1e-5)
    plain = [o[0] if need_weights else o for o in outputs[False]]
    assert (plain[1] - plain[0]).abs().max() > 1e-2  # without the norm the scale matters


def test_qk_norm_scores_unit_rms_queries_and_keys_per_head() -> None:
    torch.manual_seed(0)
    attention = MultiHeadAttention(32, 4, qk_norm=True).eval()
    x = torch.randn(2, 5, 32) * 10  # (B, T, C)
    _, probs = attention(x, causal=True, need_weights=True)  # (B, H, T, T)
    q, k, _ = (attention.qkv_proj(x) * 10).split(32, dim=-1)  # any scale: the norm removes it
    q, k = (t.view(2, 5, 4, 8).transpose(1, 2) for t in (q, k))  # (B, H, T, D)
    rms = {name: t.pow(2).mean(dim=-1, keepdim=True).sqrt() for name, t in (("q", q), ("k", k))}
    scores = (q / rms["q"]) @ (k / rms["k"]).transpose(-2, -1) / 8**0.5  # (B, H, T, T)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    expected = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
    torch.testing.assert_close(probs, expected, atol=1e-5, rtol=1e-5)


def test_qk_norm_normalises_cross_attention_too() -> None:
    torch.manual_seed(0)
    attention = MultiHeadAttention(32, 4, d_context=24, qk_norm=True).eval()
    x, context = torch.randn(2, 5, 32), torch.randn(2, 7, 24)
    before = attention(x, context)
    with torch.no_grad():
        attention.q_proj.weight *= 5
        attention.q_proj.bias *= 5
        attention.k_proj.weight *= 3
        attention.k_proj.bias *= 3
    torch.testing.assert_close(attention(x, context), before, atol=1e-5, rtol=1e-5)


def test_relu_squared_is_relu_then_square_in_the_mlp() -> None:
    x = torch.linspace(-3, 3, 13)
    torch.testing.assert_close(ReLUSquared()(x), torch.where(x > 0, x * x, torch.zeros_like(x)))
    model = tiny_model(activation="relu2")
    assert isinstance(model.blocks[0].mlp.act, ReLUSquared)
    assert isinstance(tiny_model().blocks[0].mlp.act, torch.nn.GELU)


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_zero_init_residual_starts_every_block_as_the_identity(arch: str) -> None:
    torch.manual_seed(0)
    model = tiny_model(arch, zero_init_residual=True)
    for block in model.blocks:
        assert not block.attn.out_proj.weight.any() and not block.mlp.fc2.weight.any()
        assert block.attn.qkv_proj.weight.any() and block.mlp.fc1.weight.any()
    tokens = ids()
    if arch == "decoder":  # pre-LN: the trunk is the embeddings, then the final norm
        positions = torch.arange(tokens.shape[1])[None]
        expected = model.final_norm(model.embeddings(tokens, positions))
        torch.testing.assert_close(model.hidden_states(tokens), expected)
    default = tiny_model(arch)
    assert default.blocks[0].attn.out_proj.weight.abs().min() > 0


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_logit_softcap_bounds_the_logits_and_keeps_small_ones(arch: str) -> None:
    torch.manual_seed(0)
    capped = tiny_model(arch, logit_softcap=2.0)
    free = tiny_model(arch)
    free.load_state_dict(capped.state_dict())  # the cap holds no parameter
    with torch.no_grad():
        for model in (capped, free):
            model.readout().weight.mul_(400.0)  # logits far beyond the cap
        raw, logits = free(ids()), capped(ids())
    assert raw.abs().max() > 20
    assert logits.abs().max() <= 2.0
    torch.testing.assert_close(logits, 2.0 * torch.tanh(raw / 2.0))


def test_soft_cap_keeps_small_logits_and_saturates_at_the_cap() -> None:
    z = torch.tensor([-1e4, -0.05, 0.0, 0.05, 1e4])
    torch.testing.assert_close(
        soft_cap(z, 3.0), torch.tensor([-3.0, -0.05, 0.0, 0.05, 3.0]), atol=1e-4, rtol=0
    )
    assert soft_cap(z, None) is z


def test_logit_softcap_is_positive_or_null() -> None:
    with pytest.raises(ValueError, match=r"logit_softcap=0.0 must be > 0 \(e.g. 30.0\)"):
        tiny_config(logit_softcap=0.0)
    with pytest.raises(ValueError, match="activation='swish' is unknown; choose one of: gelu"):
        tiny_config(activation="swish")


def test_options_off_are_the_network_as_before() -> None:
    torch.manual_seed(0)
    before = tiny_model(position="rope")
    torch.manual_seed(0)
    explicit = tiny_model(
        position="rope",
        qk_norm=False,
        activation="gelu",
        zero_init_residual=False,
        logit_softcap=None,
    )
    tokens = ids()
    torch.testing.assert_close(explicit(tokens), before(tokens), rtol=0, atol=0)


def layer_inputs(model: torch.nn.Module, tokens: torch.Tensor) -> list[dict]:
    """What each block's attention was called with: its input and ``extra_values``."""
    calls: list[dict] = []

    def record(module, args, kwargs) -> None:
        calls.append({"x": args[0], "extra_values": kwargs.get("extra_values")})

    hooks = [b.attn.register_forward_pre_hook(record, with_kwargs=True) for b in model.blocks]
    try:
        model(tokens)
    finally:
        for hook in hooks:
            hook.remove()
    return calls


def test_unet_skips_add_layer_i_output_to_the_input_of_layer_l_minus_1_minus_i() -> None:
    torch.manual_seed(0)
    model = tiny_model(num_layers=4, norm="pre", unet_skips=True)
    with torch.no_grad():
        model.skip_weights.copy_(torch.tensor([0.5, 2.0]))
    outputs: list[torch.Tensor] = []
    hooks = [
        b.register_forward_hook(lambda m, a, out: outputs.append(out[0])) for b in model.blocks
    ]
    tokens = ids()
    calls = layer_inputs(model, tokens)
    for hook in hooks:
        hook.remove()
    norm = [block.attn_norm for block in model.blocks]
    # Block i's attention sees attn_norm(its input): layer 2's input is layer 1's output plus
    # 2.0 x layer 1's output, layer 3's is layer 2's output plus 0.5 x layer 0's.
    torch.testing.assert_close(calls[1]["x"], norm[1](outputs[0]))
    torch.testing.assert_close(calls[2]["x"], norm[2](outputs[1] + 2.0 * outputs[1]))
    torch.testing.assert_close(calls[3]["x"], norm[3](outputs[2] + 0.5 * outputs[0]))


def test_unet_skips_with_zero_weights_are_the_plain_network() -> None:
    torch.manual_seed(0)
    skipping = tiny_model(num_layers=4, unet_skips=True)
    plain = tiny_model(num_layers=4)
    plain.load_state_dict({k: v for k, v in skipping.state_dict().items() if k != "skip_weights"})
    tokens = ids()
    assert (skipping(tokens) - plain(tokens)).abs().max() > 1e-3  # weights of 1: they matter
    with torch.no_grad():
        skipping.skip_weights.zero_()
    torch.testing.assert_close(skipping(tokens), plain(tokens))


@pytest.mark.parametrize(("n", "served"), [(1, [0, None, None, 0]), (2, [0, 1, 0, 1])])
def test_value_embedding_table_i_adds_to_the_values_of_layers_i_and_l_minus_n_plus_i(
    n: int, served: list[int | None]
) -> None:
    torch.manual_seed(0)
    model = tiny_model(num_layers=4, num_kv_heads=2, value_embeddings=n)
    tokens = ids()
    calls = layer_inputs(model, tokens)
    for layer, table in enumerate(served):
        given = calls[layer]["extra_values"]
        if table is None:
            assert given is None
        else:
            torch.testing.assert_close(given, model.value_embeddings[table](tokens))
            assert given.shape == (2, 12, 16)  # 2 key/value heads of width 8


def test_value_embeddings_of_zeros_are_the_plain_network_and_count_as_lookups() -> None:
    torch.manual_seed(0)
    valued = tiny_model(num_layers=4, value_embeddings=2)
    plain = tiny_model(num_layers=4)
    state = valued.state_dict()
    plain.load_state_dict({k: v for k, v in state.items() if not k.startswith("value_emb")})
    tokens = ids()
    assert (valued(tokens) - plain(tokens)).abs().max() > 1e-3
    with torch.no_grad():
        for table in valued.value_embeddings:
            table.weight.zero_()
    torch.testing.assert_close(valued(tokens), plain(tokens))
    # Looked up, not multiplied: out of the 6N of the FLOPs, as the position table is.
    tables = 2 * VOCAB * 32
    assert valued.num_parameters() == plain.num_parameters() + tables
    assert valued.num_parameters(exclude_embeddings=True) == plain.num_parameters(
        exclude_embeddings=True
    )


def test_value_embeddings_are_at_most_half_the_layers() -> None:
    with pytest.raises(
        ValueError, match=r"value_embeddings=2 must be in \[0, num_layers // 2 = 1\]"
    ):
        tiny_config(value_embeddings=2)  # two layers
