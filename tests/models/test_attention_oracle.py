"""MultiHeadAttention against an oracle written from the definition of attention.

The oracle shares nothing with models/attention.py except the module's weights: it never calls
``build_attention_mask`` or any other helper of ours. For every batch row b, head h and query i
it walks the keys j in plain Python, decides from first principles whether i may attend to j

    key j is real (attention_mask[b, j] == 1)
    and (not causal or j <= i + offset),  offset = T_k - T_q = keys cached before this chunk
    and the explicit mask allows (b, h, i, j) (broadcast by hand),

takes a softmax over the allowed scores q_i . k_j / sqrt(D), and sums the values with those
weights; a query with no allowed key gets a zero context vector. The heads are concatenated in
order and go through the output projection, as in "Attention Is All You Need".

Grouped-query attention: the H query heads form H_kv consecutive groups, group g sharing key/
value head g. Rotary positions (RoPE): before the scores, a query or key at position p has each
pair of its dimensions (i, i + D/2) rotated by the angle p * 10000^(-2i / D), one 2x2 rotation
at a time.

Both of the module's paths are compared: SDPA (``need_weights=False``) and the explicit softmax
(``need_weights=True``, which also returns the probabilities, compared too). Everything runs in
float64 and eval mode (no dropout), so the tolerance can be tight.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import torch
from torch import Tensor

from models.attention import MultiHeadAttention, RotaryEmbedding

DTYPE = torch.float64
# float64 end to end: the two formulations differ only by summation order (~1e-16).
ATOL = 1e-10
# The module's rotary tables are float32 (the model's dtype), the oracle's angles float64.
ROPE_ATOL = 1e-6
B, D_MODEL, HEADS, D_IN, T = 3, 8, 2, 6, 6  # d_in != d_model so a transposed weight would fail
PATHS = pytest.mark.parametrize("need_weights", [False, True], ids=["sdpa", "plain"])


# --------------------------------------------------------------------------------------------
# The oracle
# --------------------------------------------------------------------------------------------


def _projections(module: MultiHeadAttention) -> dict[str, tuple[Tensor, Tensor | None]]:
    """(weight [width, d_in_or_ctx], bias) of the q, k, v and output projections."""
    if module.is_cross_attention:
        linears = {"q": module.q_proj, "k": module.k_proj, "v": module.v_proj}
        weights = {name: (lin.weight, lin.bias) for name, lin in linears.items()}
    else:
        # The fused layer's rows are [q (d_model rows); k; v (H_kv * D rows each)] (documented
        # layout).
        kv_dim = module.num_kv_heads * module.head_dim
        w, bias = module.qkv_proj.weight, module.qkv_proj.bias
        bounds = {"q": (0, module.d_model), "k": (module.d_model, module.d_model + kv_dim)}
        bounds["v"] = (module.d_model + kv_dim, module.d_model + 2 * kv_dim)
        weights = {
            name: (w[lo:hi], None if bias is None else bias[lo:hi])
            for name, (lo, hi) in bounds.items()
        }
    weights["o"] = (module.out_proj.weight, module.out_proj.bias)
    return weights


def _project_head(
    inputs: Tensor, weight: Tensor, bias: Tensor | None, head: int, head_dim: int
) -> Tensor:
    """Head ``head``'s slice of a projection: [T, d_in] -> [T, D]."""
    rows = slice(head * head_dim, (head + 1) * head_dim)
    projected = inputs @ weight[rows].T
    return projected if bias is None else projected + bias[rows]


def _rotate(vectors: Tensor, positions: Tensor) -> Tensor:
    """RoPE from its definition: vectors [T, D] at positions [T], pair (i, i + D/2) turned by
    position * 10000^(-2i / D)."""
    half = vectors.shape[1] // 2
    rows = []
    for t in range(vectors.shape[0]):
        first, second = [], []
        for i in range(half):
            angle = float(positions[t]) * 10000.0 ** (-2 * i / vectors.shape[1])
            a, b = vectors[t, i], vectors[t, i + half]
            first.append(a * math.cos(angle) - b * math.sin(angle))
            second.append(a * math.sin(angle) + b * math.cos(angle))
        rows.append(torch.stack(first + second))
    return torch.stack(rows)  # (T, D)


def _explicit_allows(mask: Tensor, b: int, h: int, i: int, j: int) -> bool:
    """mask[b, h, i, j] with the mask's missing leading dims and size-1 dims broadcast."""
    index = (b, h, i, j)[4 - mask.dim() :]
    index = tuple(0 if size == 1 else k for k, size in zip(index, mask.shape, strict=True))
    return bool(mask[index])


def oracle_attention(
    module: MultiHeadAttention,
    x: Tensor,
    keys_from: Tensor,
    values_from: Tensor,
    *,
    attention_mask: Tensor | None = None,
    causal: bool = False,
    mask: Tensor | None = None,
    positions: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Attention of queries from ``x`` [B, T_q, d_in] over keys projected from ``keys_from``
    and values from ``values_from`` [B, T_k, *]; with ``positions`` [B, T_k] (the keys'; the
    queries are the last T_q) queries and keys are rotated (RoPE). Returns (output
    [B, T_q, d_model], probabilities [B, H, T_q, T_k]). Differentiable, so gradients can be
    compared too."""
    weights = _projections(module)
    num_heads, head_dim = module.num_heads, module.head_dim
    group_size = num_heads // module.num_kv_heads  # query heads per key/value head
    batch, q_len, k_len = x.shape[0], x.shape[1], keys_from.shape[1]
    offset = k_len - q_len  # keys that precede the first query (a KV cache's contents)
    zero = x.new_zeros(())
    outputs, all_probs = [], []
    for b in range(batch):
        heads, head_probs = [], []
        for h in range(num_heads):
            q = _project_head(x[b], *weights["q"], h, head_dim)  # (T_q, D)
            kv_head = h // group_size
            k = _project_head(keys_from[b], *weights["k"], kv_head, head_dim)  # (T_k, D)
            v = _project_head(values_from[b], *weights["v"], kv_head, head_dim)  # (T_k, D)
            if positions is not None:
                q, k = _rotate(q, positions[b, offset:]), _rotate(k, positions[b])
            rows, prob_rows = [], []
            for i in range(q_len):
                allowed = []
                for j in range(k_len):
                    if attention_mask is not None and not bool(attention_mask[b, j]):
                        continue  # padding key
                    if causal and j > i + offset:
                        continue  # a key after the query's own absolute position
                    if mask is not None and not _explicit_allows(mask, b, h, i, j):
                        continue
                    allowed.append(j)
                if not allowed:
                    # No key to attend to: the documented result is zeros, not NaN.
                    rows.append(q.new_zeros(head_dim))
                    prob_rows.append([zero] * k_len)
                    continue
                scores = [torch.dot(q[i], k[j]) / math.sqrt(head_dim) for j in allowed]
                # Subtracting the max (a constant) leaves the softmax unchanged, avoids overflow.
                top = max(float(s.detach()) for s in scores)
                exps = [torch.exp(s - top) for s in scores]
                total = sum(exps)
                p = {j: e / total for j, e in zip(allowed, exps, strict=True)}
                rows.append(sum(p[j] * v[j] for j in allowed))
                prob_rows.append([p.get(j, zero) for j in range(k_len)])
            heads.append(torch.stack(rows))  # (T_q, D)
            head_probs.append(torch.stack([torch.stack(r) for r in prob_rows]))  # (T_q, T_k)
        concat = torch.cat(heads, dim=-1)  # (T_q, d_model): head h in columns h*D:(h+1)*D
        w_o, b_o = weights["o"]
        outputs.append(concat @ w_o.T + b_o)
        all_probs.append(torch.stack(head_probs))  # (H, T_q, T_k)
    return torch.stack(outputs), torch.stack(all_probs)


# --------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------

# Row 0 all real, row 1 right padded, row 2 left padded (its first queries see no real key when
# causal).
PADDING = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1]])


@dataclass
class Case:
    module: MultiHeadAttention
    inputs: list[Tensor]  # x, then context and value for cross-attention; all require grad
    mask_kwargs: dict[str, Tensor | bool] = field(default_factory=dict)
    positions: Tensor | None = None  # (B, T): rotary positions of the tokens

    @property
    def atol(self) -> float:
        return ATOL if self.positions is None else ROPE_ATOL

    def forward(self, need_weights: bool) -> tuple[Tensor, Tensor | None]:
        x, *rest = self.inputs
        extra = {} if not rest else {"context": rest[0], "value": rest[1]}
        if self.positions is not None:
            extra["rotary"] = _rotary_tables(self.module, self.positions)
        out = self.module(x, **extra, **self.mask_kwargs, need_weights=need_weights)
        return out if need_weights else (out, None)

    def oracle(self) -> tuple[Tensor, Tensor]:
        x, *rest = self.inputs
        keys_from, values_from = (x, x) if not rest else (rest[0], rest[1])
        return oracle_attention(
            self.module, x, keys_from, values_from, **self.mask_kwargs, positions=self.positions
        )


def _rotary_tables(module: MultiHeadAttention, positions: Tensor) -> tuple[Tensor, Tensor]:
    """The module's input for rotary positions [B, T]: (cos, sin), [B, T, D/2] each."""
    tables = RotaryEmbedding(module.head_dim, int(positions.max()) + 1).to(DTYPE)
    return tables(positions)


# Rotary positions as the models count them: real tokens only (row 2 is left padded), and
# row 1 continues at position 3 as after a cached prefix.
POSITIONS = torch.tensor([[0, 1, 2, 3, 4, 5], [3, 4, 5, 6, 7, 8], [0, 0, 0, 1, 2, 3]])


def _self_case(
    num_heads: int = HEADS,
    num_kv_heads: int | None = None,
    positions: Tensor | None = None,
    **mask_kwargs: Tensor | bool,
) -> Case:
    # With four heads D_MODEL would leave 2 dimensions per head, one rotary pair: use 16.
    d_model = D_MODEL * num_heads // HEADS
    module = MultiHeadAttention(d_model, num_heads, d_in=D_IN, num_kv_heads=num_kv_heads)
    module = module.to(DTYPE).eval()
    x = torch.randn(B, T, D_IN, dtype=DTYPE, requires_grad=True)
    return Case(module, [x], mask_kwargs, positions)


def _random_mask(*shape: int) -> Tensor:
    return torch.rand(*shape) > 0.35


def _explicit_padding_causal() -> Case:
    mask = _random_mask(B, HEADS, T, T)
    mask[0, 1, 4] = False  # a row emptied by the explicit mask alone
    return _self_case(mask=mask, attention_mask=PADDING, causal=True)


def _fully_masked_rows() -> Case:
    padding = PADDING.clone()
    padding[1] = 0  # a batch row with no real key at all
    mask = torch.ones(1, HEADS, T, T, dtype=torch.bool)
    mask[0, 0, 5] = False  # query 5 of head 0 may attend nowhere, in every batch row
    # Row 2 (left padded) with causal: queries 0 and 1 see only padding.
    return _self_case(attention_mask=padding, causal=True, mask=mask)


def _cross(explicit: bool) -> Case:
    d_context, t_k = 5, 7
    module = MultiHeadAttention(D_MODEL, HEADS, d_in=D_IN, d_context=d_context)
    module = module.to(DTYPE).eval()
    x = torch.randn(B, T, D_IN, dtype=DTYPE, requires_grad=True)
    context = torch.randn(B, t_k, d_context, dtype=DTYPE, requires_grad=True)
    value = torch.randn(B, t_k, d_context, dtype=DTYPE, requires_grad=True)  # != context
    padding = torch.tensor([[1] * 7, [1] * 4 + [0] * 3, [0] * 2 + [1] * 5])
    kwargs: dict[str, Tensor | bool] = {"attention_mask": padding}
    if explicit:
        kwargs["mask"] = _random_mask(B, 1, T, t_k)  # broadcast over heads
    return Case(module, [x, context, value], kwargs)


CASES: dict[str, Callable[[], Case]] = {
    "padding": lambda: _self_case(attention_mask=PADDING),
    "causal": lambda: _self_case(causal=True),
    "causal_padding": lambda: _self_case(attention_mask=PADDING, causal=True),
    "explicit_padding_causal": _explicit_padding_causal,
    "explicit_2d_padding": lambda: _self_case(mask=_random_mask(T, T), attention_mask=PADDING),
    "fully_masked_rows": _fully_masked_rows,
    "cross_padding": lambda: _cross(explicit=False),
    "cross_explicit_padding": lambda: _cross(explicit=True),
    "mqa_causal_padding": lambda: _self_case(num_kv_heads=1, attention_mask=PADDING, causal=True),
    "gqa_explicit_padding": lambda: _self_case(
        num_heads=4, num_kv_heads=2, mask=_random_mask(B, 4, T, T), attention_mask=PADDING
    ),
    "rope_padding": lambda: _self_case(positions=POSITIONS, attention_mask=PADDING),
    "rope_gqa_causal_padding": lambda: _self_case(
        num_heads=4, num_kv_heads=2, positions=POSITIONS, attention_mask=PADDING, causal=True
    ),
}


@PATHS
@pytest.mark.parametrize("name", list(CASES))
def test_matches_oracle_with_gradients(name: str, need_weights: bool) -> None:
    torch.manual_seed(0)
    case = CASES[name]()
    out, probs = case.forward(need_weights)
    expected_out, expected_probs = case.oracle()
    torch.testing.assert_close(out, expected_out, atol=case.atol, rtol=0)
    if need_weights:
        torch.testing.assert_close(probs, expected_probs, atol=case.atol, rtol=0)

    # Gradients of the same loss through both, w.r.t. every input and parameter.
    grad_out = torch.randn_like(out)
    params = list(case.module.parameters())
    ours = torch.autograd.grad(out, case.inputs + params, grad_out)
    reference = torch.autograd.grad(expected_out, case.inputs + params, grad_out)
    for got, want in zip(ours, reference, strict=True):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, want, atol=case.atol, rtol=0)


@PATHS
def test_fully_masked_rows_are_zero(need_weights: bool) -> None:
    torch.manual_seed(0)
    case = _fully_masked_rows()
    out, probs = case.forward(need_weights)
    _, expected_probs = case.oracle()
    empty = expected_probs.sum(-1) == 0  # (B, H, T_q): rows the oracle found no key for
    # The fixture really has empty rows of all three kinds (padding, causal+padding, explicit).
    assert empty[1].all() and empty[2, :, :2].all() and empty[0, 0, 5] and not empty[0, 1, 5]
    # A context vector that is zero in every head leaves exactly the output projection's bias.
    all_heads_empty = empty.all(dim=1)  # (B, T_q)
    assert (out[all_heads_empty] == case.module.out_proj.bias).all()
    if need_weights:
        assert (probs[empty] == 0).all()


# --------------------------------------------------------------------------------------------
# KV cache: a chunk of queries after cached keys (offset = number of cached keys)
# --------------------------------------------------------------------------------------------

PREFIX, CHUNK = 4, 3


@PATHS
@pytest.mark.parametrize(
    "variant", ["causal", "causal_padding", "causal_padding_explicit", "causal_padding_rope_gqa"]
)
@torch.no_grad()
def test_kv_cache_chunk_matches_oracle(variant: str, need_weights: bool) -> None:
    torch.manual_seed(0)
    rope_gqa = variant.endswith("rope_gqa")
    heads, kv_heads = (4, 2) if rope_gqa else (HEADS, None)
    d_model = D_MODEL * heads // HEADS
    module = MultiHeadAttention(d_model, heads, d_in=D_IN, num_kv_heads=kv_heads)
    module = module.to(DTYPE).eval()
    total = PREFIX + CHUNK
    x = torch.randn(B, total, D_IN, dtype=DTYPE)  # (B, T_k, d_in): prefix, then the chunk
    padding = None
    if variant != "causal":
        # Left padding reaching into the chunk for row 2; one padded key mid-sequence in row 1.
        padding = torch.tensor([[1] * total, [1, 1, 0, 1, 1, 1, 1], [0] * 5 + [1, 1]])
    explicit = _random_mask(B, HEADS, CHUNK, total) if variant.endswith("explicit") else None
    # Real tokens counted, as the models do; the cache holds keys rotated at these positions.
    positions = (padding.cumsum(-1) - 1).clamp(min=0) if rope_gqa else None  # (B, T_k)

    def rotary(start: int, end: int) -> tuple[Tensor, Tensor] | None:
        return None if positions is None else _rotary_tables(module, positions[:, start:end])

    cache = module.init_cache(B, max_len=total + 1)
    assert cache.keys.dtype == DTYPE
    # The prefix goes in two pieces, so the cache is exercised before the chunk under test.
    for start, end in ((0, 2), (2, PREFIX)):
        step_mask = None if padding is None else padding[:, :end]  # covers cached keys too
        module(
            x[:, start:end],
            causal=True,
            attention_mask=step_mask,
            kv_cache=cache,
            need_weights=need_weights,
            rotary=rotary(start, end),
        )
    assert cache.length == PREFIX
    assert cache.keys.shape[1] == module.num_kv_heads
    result = module(
        x[:, PREFIX:],
        causal=True,
        attention_mask=padding,
        mask=explicit,
        kv_cache=cache,
        need_weights=need_weights,
        rotary=rotary(PREFIX, total),
    )
    out, probs = result if need_weights else (result, None)

    # The oracle sees all keys at once; offset = PREFIX comes from T_k - T_q.
    expected_out, expected_probs = oracle_attention(
        module,
        x[:, PREFIX:],
        x,
        x,
        attention_mask=padding,
        causal=True,
        mask=explicit,
        positions=positions,
    )
    atol = ATOL if positions is None else ROPE_ATOL
    assert out.shape == (B, CHUNK, d_model)
    torch.testing.assert_close(out, expected_out, atol=atol, rtol=0)
    if need_weights:
        assert probs.shape == (B, heads, CHUNK, total)
        torch.testing.assert_close(probs, expected_probs, atol=atol, rtol=0)
    # The oracle's own bottom-right alignment, spelled out: the chunk's first query (absolute
    # position PREFIX) sees every real cached key and itself, never the two keys after it.
    first_row = expected_probs[0, :, 0]  # (H, T_k), batch row 0 has no padding
    if explicit is None:
        assert (first_row[:, : PREFIX + 1] > 0).all() and (first_row[:, PREFIX + 1 :] == 0).all()
