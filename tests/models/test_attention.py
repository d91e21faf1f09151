"""Tests for models/attention.py: seed references, SDPA vs plain path, masks, dropout, KV cache.

Each of the three reference designs the module unifies (tests/seed_references.py) has its
weights copied into our module, and the outputs must agree in the design's own setting.
Everything else compares our two paths (SDPA and the explicit softmax that ``need_weights``
takes) and checks the invariants of the mask convention (ARCHITECTURE.md).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models.attention import (
    KVCache,
    MultiHeadAttention,
    RotaryEmbedding,
    apply_rotary,
    build_attention_mask,
)
from tests.seed_references import Seed000SelfAttention, Seed003Attention, Seed004CausalAttention

ATOL = 1e-5


def _copy_linear(dst: nn.Linear, src: nn.Linear) -> None:
    with torch.no_grad():
        dst.weight.copy_(src.weight)
        if dst.bias is not None:
            dst.bias.copy_(src.bias)


# --------------------------------------------------------------------------------------------
# Seeds
# --------------------------------------------------------------------------------------------


def test_seed_000_fused_qkv_with_partial_padding() -> None:
    torch.manual_seed(0)
    ref = Seed000SelfAttention(hidden_size=32, num_heads=4, dropout_prob=0.1).eval()
    ours = MultiHeadAttention(32, 4, dropout=0.1).eval()
    _copy_linear(ours.qkv_proj, ref.qkv)
    _copy_linear(ours.out_proj, ref.out)
    x = torch.randn(3, 7, 32)  # (B, T, H)
    attention_mask = torch.tensor(
        [[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0]]
    )  # (B, T)
    expected = ref(x, attention_mask)
    torch.testing.assert_close(ours(x, attention_mask=attention_mask), expected, atol=ATOL, rtol=0)
    out, _ = ours(x, attention_mask=attention_mask, need_weights=True)
    torch.testing.assert_close(out, expected, atol=ATOL, rtol=0)


def test_seed_003_cross_attention_distinct_lengths_and_value() -> None:
    torch.manual_seed(0)
    d_model, heads = 32, 4
    ref = Seed003Attention(d_model, heads, dropout=0.1).eval()
    ours = MultiHeadAttention(d_model, heads, dropout=0.1, d_context=d_model).eval()
    for dst, src in (
        (ours.q_proj, ref.Wq),
        (ours.k_proj, ref.Wk),
        (ours.v_proj, ref.Wv),
        (ours.out_proj, ref.Wo),
    ):
        _copy_linear(dst, src)
    query = torch.randn(2, 5, d_model)  # (B, T_q, d)
    key = torch.randn(2, 8, d_model)  # (B, T_k, d)
    value = torch.randn(2, 8, d_model)  # (B, T_k, d), distinct from key
    key_padding = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0, 0, 0]])  # (B, T_k)
    expected_out, expected_probs = ref(query, key, value, key_padding[:, None, None, :])

    out, probs = ours(query, key, value=value, attention_mask=key_padding, need_weights=True)
    assert probs.shape == (2, heads, 5, 8)
    torch.testing.assert_close(out, expected_out, atol=ATOL, rtol=0)
    torch.testing.assert_close(probs, expected_probs, atol=ATOL, rtol=0)
    # The same mask given as seed 003 gives it (explicit, 1 = keep), and the SDPA path.
    out_explicit = ours(query, key, value=value, mask=key_padding[:, None, None, :])
    torch.testing.assert_close(out_explicit, expected_out, atol=ATOL, rtol=0)
    # Without a mask, and with value omitted (keys and values both from the context).
    torch.testing.assert_close(
        ours(query, key, value=value), ref(query, key, value)[0], atol=ATOL, rtol=0
    )
    torch.testing.assert_close(ours(query, key), ref(query, key, key)[0], atol=ATOL, rtol=0)


# The book's six-token example ("Your journey starts with one step"), batched twice.
BOOK_INPUTS = torch.tensor(
    [
        [0.43, 0.15, 0.89],
        [0.55, 0.87, 0.66],
        [0.57, 0.85, 0.64],
        [0.22, 0.58, 0.33],
        [0.77, 0.25, 0.10],
        [0.05, 0.80, 0.55],
    ]
)
# The context vectors the book prints for torch.manual_seed(123), to 4 decimals (per sequence).
BOOK_OUTPUT = torch.tensor(
    [
        [0.3190, 0.4858],
        [0.2943, 0.3897],
        [0.2856, 0.3593],
        [0.2693, 0.3873],
        [0.2639, 0.3928],
        [0.2575, 0.4028],
    ]
)


def test_seed_004_two_heads_d_in_ne_d_out_causal() -> None:
    batch = torch.stack((BOOK_INPUTS, BOOK_INPUTS), dim=0)  # (2, 6, 3)
    torch.manual_seed(123)
    ref = Seed004CausalAttention(d_in=3, d_out=2, context_length=6, dropout=0.0, num_heads=2)
    ours = MultiHeadAttention(2, 2, d_in=3, qkv_bias=False)
    assert ours.qkv_proj.bias is None and ours.out_proj.bias is not None
    with torch.no_grad():
        # Fused rows are [q; k; v], so the book's three matrices concatenate in that order.
        ours.qkv_proj.weight.copy_(
            torch.cat([ref.W_query.weight, ref.W_key.weight, ref.W_value.weight], dim=0)
        )
    _copy_linear(ours.out_proj, ref.out_proj)
    expected = ref(batch)
    # The reference reproduces the book's printed numbers, so it is the book's formulation.
    torch.testing.assert_close(expected, torch.stack((BOOK_OUTPUT, BOOK_OUTPUT)), atol=1e-4, rtol=0)
    out = ours(batch, causal=True)
    assert out.shape == (2, 6, 2)
    torch.testing.assert_close(out, expected, atol=ATOL, rtol=0)
    torch.testing.assert_close(
        ours(batch, causal=True, need_weights=True)[0], expected, atol=ATOL, rtol=0
    )


# --------------------------------------------------------------------------------------------
# SDPA path == plain path
# --------------------------------------------------------------------------------------------

B, T, D_MODEL, HEADS = 3, 7, 16, 4
PADDING = torch.tensor([[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0, 0], [0, 0, 1, 1, 1, 1, 1]])


def attention_case(name: str, seed: int = 0) -> tuple[MultiHeadAttention, dict, list[Tensor]]:
    """A module, forward kwargs and the float inputs (requiring grad) for one mask case."""
    torch.manual_seed(seed)
    x = torch.randn(B, T, 12, requires_grad=True)  # (B, T, d_in), d_in != d_model
    if name == "cross_padding":
        module = MultiHeadAttention(D_MODEL, HEADS, d_in=12, d_context=10)
        context = torch.randn(B, 9, 10, requires_grad=True)  # (B, T_k, d_context)
        value = torch.randn(B, 9, 10, requires_grad=True)
        ctx_padding = torch.tensor([[1] * 9, [1] * 5 + [0] * 4, [1] * 2 + [0] * 7])
        kwargs = {"context": context, "value": value, "attention_mask": ctx_padding}
        return module, kwargs, [x, context, value]
    if name.startswith(("gqa_", "rope_gqa_")):
        # Two query heads per key/value head, rotary positions counting real tokens.
        module = MultiHeadAttention(D_MODEL, HEADS, d_in=12, num_kv_heads=2)
        positions = (PADDING.cumsum(-1) - 1).clamp(min=0)  # (B, T)
        rotary = (
            RotaryEmbedding(D_MODEL // HEADS, T)(positions) if name.startswith("rope") else None
        )
        kwargs = {"causal": True, "attention_mask": PADDING, "rotary": rotary}
        return module, kwargs, [x]
    module = MultiHeadAttention(D_MODEL, HEADS, d_in=12)
    explicit = torch.rand(B, HEADS, T, T) > 0.4  # (B, H, T, T), some rows entirely False
    explicit[0, 0, 0] = False
    kwargs = {
        "padding": {"attention_mask": PADDING},
        "causal": {"causal": True},
        "causal_padding": {"causal": True, "attention_mask": PADDING},
        "explicit_mask": {"mask": explicit},
        "explicit_2d_mask": {"mask": torch.ones(T, T, dtype=torch.bool).triu()},
        "explicit_padding_causal": {"mask": explicit, "attention_mask": PADDING, "causal": True},
        "none": {},
    }[name]
    return module, kwargs, [x]


CASES = [
    "none",
    "padding",
    "causal",
    "causal_padding",
    "cross_padding",
    "explicit_mask",
    "explicit_2d_mask",
    "explicit_padding_causal",
    "gqa_causal_padding",
    "rope_gqa_causal_padding",
]


def attention_output(
    module: MultiHeadAttention, x: Tensor, kwargs: dict, need_weights: bool
) -> Tensor:
    out = module(x, **kwargs, need_weights=need_weights)
    return out[0] if need_weights else out


@pytest.mark.parametrize("name", CASES)
def test_sdpa_path_matches_plain_path_with_gradients(name: str) -> None:
    module, kwargs, inputs = attention_case(name)
    module.eval()
    grad_out = torch.randn(B, T, D_MODEL)
    results = []
    for need_weights in (False, True):
        module.zero_grad()
        for t in inputs:
            t.grad = None
        out = attention_output(module, inputs[0], kwargs, need_weights)
        (out * grad_out).sum().backward()
        grads = [t.grad.clone() for t in inputs]
        grads += [p.grad.clone() for p in module.parameters()]
        results.append((out.detach(), grads))
    (out_sdpa, grads_sdpa), (out_plain, grads_plain) = results
    torch.testing.assert_close(out_sdpa, out_plain, atol=ATOL, rtol=0)
    assert len(grads_sdpa) == len(grads_plain) > len(inputs)
    for g_sdpa, g_plain in zip(grads_sdpa, grads_plain, strict=True):
        assert torch.isfinite(g_sdpa).all()
        torch.testing.assert_close(g_sdpa, g_plain, atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    ("kwargs", "expect_causal", "expect_mask"),
    [
        ({"causal": True}, True, False),
        ({"causal": True, "attention_mask": PADDING}, False, True),
        ({"attention_mask": PADDING}, False, True),
        ({}, False, False),
    ],
    ids=["causal", "causal_padding", "padding", "none"],
)
def test_sdpa_receives_is_causal_without_mask_tensor(
    sdpa_calls: list[dict], kwargs: dict, expect_causal: bool, expect_mask: bool
) -> None:
    calls = sdpa_calls
    module = MultiHeadAttention(D_MODEL, HEADS).eval()
    module(torch.randn(B, T, D_MODEL), **kwargs)
    assert len(calls) == 1
    assert calls[0].get("is_causal", False) is expect_causal
    assert (calls[0].get("attn_mask") is not None) is expect_mask
    # Never both: SDPA's is_causal with a mask tensor is an error or a silent double mask.
    assert not (calls[0].get("is_causal") and calls[0].get("attn_mask") is not None)


def test_build_attention_mask_causal_is_bottom_right_aligned() -> None:
    allowed, is_causal = build_attention_mask(
        batch_size=1, num_heads=1, q_len=2, k_len=4, causal=True
    )
    assert not is_causal
    expected = torch.tensor([[True, True, True, False], [True, True, True, True]])
    assert torch.equal(allowed, expected)
    assert build_attention_mask(batch_size=2, num_heads=3, q_len=4, k_len=4) == (None, False)


# --------------------------------------------------------------------------------------------
# Mask invariants
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("padding", [False, True])
def test_future_tokens_never_change_earlier_outputs(need_weights: bool, padding: bool) -> None:
    torch.manual_seed(0)
    module = MultiHeadAttention(D_MODEL, HEADS).eval()
    x = torch.randn(B, T, D_MODEL)  # (B, T, d)
    kwargs = {"causal": True, "attention_mask": PADDING if padding else None}
    out = attention_output(module, x, kwargs, need_weights)
    for t in range(1, T):
        changed = x.clone()
        changed[:, t:] = torch.randn(B, T - t, D_MODEL) * 10
        out_changed = attention_output(module, changed, kwargs, need_weights)
        torch.testing.assert_close(out_changed[:, :t], out[:, :t], atol=ATOL, rtol=0)
        assert not torch.allclose(out_changed[:, t:], out[:, t:])


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("name", ["padding", "causal_padding", "cross_padding"])
def test_padded_tokens_never_change_real_outputs(name: str, need_weights: bool) -> None:
    module, kwargs, inputs = attention_case(name)
    module.eval()
    x = inputs[0].detach()
    padding = kwargs["attention_mask"]
    out = attention_output(module, x, kwargs, need_weights)
    changed_kwargs = dict(kwargs)
    if name == "cross_padding":
        # Padding is on the context: garble padded context keys and values.
        pad = padding == 0  # (B, T_k)
        for key in ("context", "value"):
            changed = kwargs[key].detach().clone()
            changed[pad] = torch.randn(int(pad.sum()), changed.shape[-1]) * 10
            changed_kwargs[key] = changed
        real_queries = torch.ones(B, T, dtype=torch.bool)
        # The third row has real keys, so no query row is empty.
    else:
        pad = padding == 0  # (B, T)
        x = x.clone()
        x[pad] = torch.randn(int(pad.sum()), x.shape[-1]) * 10
        real_queries = ~pad
    out_changed = attention_output(module, x, changed_kwargs, need_weights)
    torch.testing.assert_close(out_changed[real_queries], out[real_queries], atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    "name",
    ["padding", "causal_padding", "cross_padding", "explicit_mask", "explicit_padding_causal"],
)
def test_probabilities_sum_to_one_over_allowed_keys(name: str) -> None:
    module, kwargs, inputs = attention_case(name)
    module.eval()
    _, probs = module(inputs[0], **kwargs, need_weights=True)  # (B, H, T_q, T_k)
    t_k = probs.shape[-1]
    allowed, is_causal = build_attention_mask(
        batch_size=B,
        num_heads=HEADS,
        q_len=T,
        k_len=t_k,
        device="cpu",
        attention_mask=kwargs.get("attention_mask"),
        causal=kwargs.get("causal", False),
        mask=kwargs.get("mask"),
    )
    assert not is_causal
    allowed = allowed.expand_as(probs)  # (B, H, T_q, T_k)
    has_key = allowed.any(dim=-1)  # (B, H, T_q)
    assert (probs[~allowed] == 0).all()
    sums = probs.sum(dim=-1)  # (B, H, T_q)
    torch.testing.assert_close(sums[has_key], torch.ones_like(sums[has_key]))
    assert (sums[~has_key] == 0).all()


def _fp16_supported() -> bool:
    try:
        a = torch.randn(2, 3, 4, dtype=torch.float16)
        torch.softmax(a @ a.transpose(-2, -1), dim=-1)
        F.scaled_dot_product_attention(a[None], a[None], a[None])
    except RuntimeError:
        return False
    return True


@pytest.mark.parametrize("need_weights", [False, True], ids=["sdpa", "plain"])
@pytest.mark.parametrize(
    "dtype",
    [
        pytest.param(torch.float32, id="float32"),
        pytest.param(
            torch.float16,
            id="float16",
            marks=pytest.mark.skipif(
                not _fp16_supported(), reason="float16 matmul/softmax not supported on this CPU"
            ),
        ),
        pytest.param(torch.bfloat16, id="bfloat16"),
    ],
)
@pytest.mark.parametrize("kind", ["all_padding", "causal_left_padding", "explicit_empty_row"])
def test_fully_masked_rows_are_zero_and_finite(
    kind: str, dtype: torch.dtype, need_weights: bool
) -> None:
    torch.manual_seed(0)
    module = MultiHeadAttention(D_MODEL, HEADS).to(dtype).eval()
    x = torch.randn(B, T, D_MODEL, dtype=dtype, requires_grad=True)  # (B, T, d)
    empty = torch.zeros(B, T, dtype=torch.bool)  # (B, T_q) rows with no allowed key
    if kind == "all_padding":
        attention_mask = PADDING.clone()
        attention_mask[1] = 0
        kwargs = {"attention_mask": attention_mask}
        empty[1] = True
    elif kind == "causal_left_padding":
        kwargs = {"attention_mask": PADDING, "causal": True}
        empty[2, :2] = True  # queries 0 and 1 of row 2 see only left padding
    else:
        mask = torch.ones(B, 1, T, T, dtype=torch.bool)
        mask[0, 0, 3] = False
        kwargs = {"mask": mask}
        empty[0, 3] = True
    out = attention_output(module, x, kwargs, need_weights)
    assert torch.isfinite(out).all()
    # A zero context vector leaves only the output projection's bias.
    bias = module.out_proj.bias.detach()
    assert (out[empty] == bias).all()
    out.float().square().sum().backward()
    assert torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in module.parameters())
    if need_weights:
        _, probs = module(x, **kwargs, need_weights=True)
        assert (probs.permute(0, 2, 1, 3)[empty] == 0).all()


@pytest.mark.parametrize("need_weights", [False, True], ids=["sdpa", "plain"])
def test_fully_masked_rows_with_dropout_in_train_mode(need_weights: bool) -> None:
    # With dropout, CPU SDPA leaves its fused kernel for the math one: check that path too.
    torch.manual_seed(0)
    module = MultiHeadAttention(D_MODEL, HEADS, attn_dropout=0.3).train()
    x = torch.randn(B, T, D_MODEL, requires_grad=True)  # (B, T, d)
    attention_mask = PADDING.clone()
    attention_mask[1] = 0
    out = attention_output(
        module, x, {"attention_mask": attention_mask, "causal": True}, need_weights
    )
    assert (out[1] == module.out_proj.bias.detach()).all()
    assert (out[2, :2] == module.out_proj.bias.detach()).all()
    out.square().sum().backward()
    assert torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in module.parameters())


def test_rotation_backward_is_the_inverse_rotation() -> None:
    """apply_rotary's hand-written backward against finite differences (float64), on a
    strided view as the attention module passes it, and its forward against the textbook
    formula x cos + rotate_half(x) sin."""
    torch.manual_seed(0)
    heads = torch.randn(2, 5, 3, 8, dtype=torch.float64)  # (B, T, n, D)
    x = heads[:, :, :2].requires_grad_()  # (B, T, 2, D), not contiguous
    tables = RotaryEmbedding(8, 7).to(torch.float64)
    cos, sin = (t[:, :, None] for t in tables(torch.tensor([[0, 1, 2, 3, 4], [6, 5, 0, 2, 1]])))
    assert torch.autograd.gradcheck(lambda v: apply_rotary(v, cos, sin), (x,))
    cos2, sin2 = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
    rotate_half = torch.cat([-x[..., 4:], x[..., :4]], dim=-1)
    torch.testing.assert_close(apply_rotary(x, cos, sin), x * cos2 + rotate_half * sin2)


def test_rotation_under_torch_compile_is_one_graph_with_the_same_values() -> None:
    """trainer=gpu compiles the network: the rotation must trace without a graph break
    (fullgraph) and give the eager outputs and gradients. aot_eager: tracing and autograd as
    inductor gets them, without a C++ compiler."""
    torch.manual_seed(0)
    x = torch.randn(2, 5, 3, 8)[:, :, :2].requires_grad_()  # (B, T, 2, D), not contiguous
    cos, sin = (t[:, :, None] for t in RotaryEmbedding(8, 5)(torch.arange(5)[None]))
    grad = torch.randn(2, 5, 2, 8)
    compiled = torch.compile(apply_rotary, backend="aot_eager", fullgraph=True)
    results = []
    for rotate in (apply_rotary, compiled):
        out = rotate(x, cos, sin)
        results.append((out, *torch.autograd.grad(out, x, grad)))
    for eager, traced in zip(*results, strict=True):
        torch.testing.assert_close(traced, eager)


# --------------------------------------------------------------------------------------------
# Dropout
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("need_weights", [False, True], ids=["sdpa", "plain"])
@pytest.mark.parametrize(
    ("attn_p", "proj_p"), [(0.3, 0.0), (0.0, 0.3), (0.3, 0.3)], ids=["attn", "proj", "both"]
)
def test_dropout_train_vs_eval(attn_p: float, proj_p: float, need_weights: bool) -> None:
    torch.manual_seed(0)
    module = MultiHeadAttention(D_MODEL, HEADS, attn_dropout=attn_p, proj_dropout=proj_p)
    assert module.attn_dropout == attn_p and module.proj_dropout.p == proj_p
    x = torch.randn(B, T, D_MODEL)
    kwargs = {"attention_mask": PADDING}
    module.train()
    first = attention_output(module, x, kwargs, need_weights)
    second = attention_output(module, x, kwargs, need_weights)
    assert not torch.equal(first, second)
    module.eval()
    reference = attention_output(module, x, kwargs, need_weights)
    torch.testing.assert_close(attention_output(module, x, kwargs, need_weights), reference)
    if attn_p == 0.0:
        # Only the projection drops: every element is 0 or the eval value scaled by 1/(1-p).
        dropped = first == 0
        assert dropped.any()
        torch.testing.assert_close(first[~dropped], reference[~dropped] / (1 - proj_p))
    else:
        assert not torch.allclose(first, reference)
    if proj_p == 0.0:
        assert not (first == 0).any()  # no element zeroed by an output dropout


def test_dropout_defaults_and_probabilities_before_dropout() -> None:
    module = MultiHeadAttention(D_MODEL, HEADS, dropout=0.2, proj_dropout=0.0)
    assert module.attn_dropout == 0.2 and module.proj_dropout.p == 0.0
    module.train()
    _, probs = module(torch.randn(B, T, D_MODEL), need_weights=True)
    torch.testing.assert_close(probs.sum(-1), torch.ones(B, HEADS, T))


# --------------------------------------------------------------------------------------------
# KV cache
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("need_weights", [False, True], ids=["sdpa", "plain"])
@pytest.mark.parametrize("padding", [False, True], ids=["no_padding", "padding"])
@pytest.mark.parametrize("chunks", [[1] * T, [3, 2, 1, 1], [T]], ids=["tokens", "chunks", "one"])
def test_kv_cache_matches_full_causal_pass(
    chunks: list[int], padding: bool, need_weights: bool
) -> None:
    torch.manual_seed(0)
    module = MultiHeadAttention(D_MODEL, HEADS, d_in=12).eval()
    x = torch.randn(B, T, 12)  # (B, T, d_in)
    attention_mask = PADDING if padding else None
    full = attention_output(
        module, x, {"causal": True, "attention_mask": attention_mask}, need_weights
    )
    cache = module.init_cache(B, max_len=T + 2)
    assert isinstance(cache, KVCache)
    pieces, start = [], 0
    for size in chunks:
        end = start + size
        # The padding mask covers every key seen so far, the cached ones included.
        step_mask = None if attention_mask is None else attention_mask[:, :end]
        kwargs = {"causal": True, "attention_mask": step_mask, "kv_cache": cache}
        pieces.append(attention_output(module, x[:, start:end], kwargs, need_weights))
        start = end
    assert cache.length == T
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=ATOL, rtol=0)


def test_kv_cache_overflow_is_an_error() -> None:
    module = MultiHeadAttention(D_MODEL, HEADS).eval()
    cache = module.init_cache(1, max_len=4)
    module(torch.randn(1, 3, D_MODEL), causal=True, kv_cache=cache)
    with pytest.raises(ValueError, match=r"3 cached \+ 2 new positions exceed its max_len=4"):
        module(torch.randn(1, 2, D_MODEL), causal=True, kv_cache=cache)


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"d_model": 10, "num_heads": 3},
            r"d_model=10 is not divisible by num_heads=3; valid head counts for 10: 1, 2, 5, 10",
        ),
        ({"d_model": 16, "num_heads": 0}, r"d_model=16 is not divisible by num_heads=0"),
        (
            {"d_model": 16, "num_heads": 4, "num_kv_heads": 3},
            r"num_kv_heads=3 does not divide num_heads=4; use one of 1, 2, 4",
        ),
        ({"d_model": 16, "num_heads": 4, "dropout": 1.0}, r"dropout=1.0 is outside \[0, 1\)"),
        (
            {"d_model": 16, "num_heads": 4, "attn_dropout": -0.1},
            r"attn_dropout=-0.1 is outside \[0, 1\)",
        ),
        (
            {"d_model": 16, "num_heads": 4, "proj_dropout": 1.5},
            r"proj_dropout=1.5 is outside \[0, 1\)",
        ),
    ],
)
def test_constructor_errors(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        MultiHeadAttention(**kwargs)


def test_forward_errors() -> None:
    module = MultiHeadAttention(D_MODEL, HEADS)
    x = torch.randn(2, 6, D_MODEL)
    with pytest.raises(
        ValueError,
        match=r"attention_mask has shape \(2, 5\), expected "
        r"\[batch, key_length\] = \[2, 6\]",
    ):
        module(x, attention_mask=torch.ones(2, 5, dtype=torch.long))
    with pytest.raises(
        ValueError,
        match=r"mask has shape \(2, 3, 6, 6\), which does not "
        r"broadcast to .* = \[2, 4, 6, 6\]",
    ):
        module(x, mask=torch.ones(2, 3, 6, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"mask has dtype torch.float32"):
        module(x, mask=torch.zeros(6, 6))
    with pytest.raises(ValueError, match=r"x has shape \(2, 6, 8\), expected .*d_in=16"):
        module(torch.randn(2, 6, 8))
    with pytest.raises(ValueError, match=r"d_context=<context width>"):
        module(x, torch.randn(2, 6, D_MODEL))

    cross = MultiHeadAttention(D_MODEL, HEADS, d_context=8)
    context = torch.randn(2, 9, 8)
    with pytest.raises(ValueError, match=r"context has length 9 and x has length 6"):
        cross(x, context, causal=True)
    with pytest.raises(ValueError, match=r"value has length 4 but context .* has length 9"):
        cross(x, context, value=torch.randn(2, 4, 8))
    with pytest.raises(ValueError, match=r"attention_mask has shape \(2, 6\), .* = \[2, 9\]"):
        cross(x, context, attention_mask=torch.ones(2, 6, dtype=torch.long))
    with pytest.raises(ValueError, match=r"pass context="):
        cross(x)
    with pytest.raises(ValueError, match=r"kv_cache is for self-attention"):
        cross(x, context, kv_cache=module.init_cache(2, 10))
    with pytest.raises(ValueError, match=r"rotary is for self-attention"):
        cross(x, context, rotary=RotaryEmbedding(D_MODEL // HEADS, 6)(torch.arange(6)[None]))
    with pytest.raises(ValueError, match=r"position=rope needs an even head dimension.* = 5"):
        RotaryEmbedding(5, 8)
