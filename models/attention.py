"""The one multi-head attention module of tinylm, and the one function that builds its masks.

Notation: B batch, H heads, H_kv key/value heads (H for multi-head, fewer for grouped-query,
1 for multi-query attention), T_q query length, T_k key length (cached keys included), D head
width, d_model = H * D.

Mask convention (ARCHITECTURE.md, "The mask convention"): the user-facing padding mask is
Hugging Face's ``attention_mask`` of shape [B, T_k], 1/True for a real token and 0/False for
padding; it masks keys. Inside, every mask becomes one boolean tensor broadcastable to
[B, H, T_q, T_k] where True means "may attend", which both the SDPA path and the plain path
consume.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models.config import check_dropout, check_head_count, check_kv_heads, check_rotary_dim

ROPE_BASE = 10000.0


class RotaryEmbedding(nn.Module):
    """The cos/sin tables of rotary position embeddings (RoPE, Su et al. 2021), computed once.

    Position p rotates the pair of head dimensions (i, i + D/2) by the angle
    p * ROPE_BASE^(-2i/D), i < D/2 (the half-split pairing of GPT-NeoX and Llama: two
    contiguous halves, cheaper than interleaved pairs, and equivalent up to a fixed permutation
    of the projection rows). Rotating queries and keys makes their dot product depend on the
    distance between their positions only.
    """

    def __init__(self, head_dim: int, max_len: int) -> None:
        super().__init__()
        check_rotary_dim(head_dim)
        # float64 angles: in float32, position x frequency loses ~1e-4 rad at a few thousand
        # positions; the tables themselves are stored in the default dtype.
        exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim  # (D/2,)
        angles = torch.arange(max_len, dtype=torch.float64)[:, None] * ROPE_BASE**-exponents
        dtype = torch.get_default_dtype()
        # Not persistent: a function of the config, so checkpoints need not carry them.
        self.register_buffer("cos", angles.cos().to(dtype), persistent=False)  # (T_max, D/2)
        self.register_buffer("sin", angles.sin().to(dtype), persistent=False)  # (T_max, D/2)

    def forward(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """Positions [B|1, T] -> (cos, sin), [B|1, T, D/2] each (pair i's angle), for
        ``MultiHeadAttention``."""
        return F.embedding(positions, self.cos), F.embedding(positions, self.sin)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate each pair (x_i, x_{i + D/2}) of the last dimension by the angle of cos/sin
    [..., D/2] (broadcast against x; constant tables, no gradient flows into them)."""
    if torch.compiler.is_compiling():
        # torch.compile (trainer=gpu) fuses the textbook formula into one kernel each way,
        # where the Function's writes into slices of its output would break the graph. In x's
        # dtype: under autocast x is half precision while the tables stay float32, and the
        # rotated keys must match the values' dtype.
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]  # (..., D/2) each
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)  # (..., D)
    return _Rotation.apply(x, cos, sin)


class _Rotation(torch.autograd.Function):
    """RoPE's rotation with its backward written out: the gradient is the inverse rotation.

    Autograd of the textbook formula ``x * cos + rotate_half(x) * sin`` records six ops and
    runs about twice as many kernels over [B, T, H, D] (the halves' slices, their
    concatenation, the scatter-back of the slices' gradients); this runs four half-size
    kernels each way, which is what matters at small shapes on the CPU. tests/
    test_attention_oracle.py checks outputs and gradients against RoPE from its definition.
    """

    @staticmethod
    def forward(ctx: Any, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        ctx.save_for_backward(cos, sin)
        return _rotate(x, cos, sin, sign=1.0)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        cos, sin = ctx.saved_tensors
        return _rotate(grad, cos, sin, sign=-1.0), None, None


def _rotate(x: Tensor, cos: Tensor, sin: Tensor, *, sign: float) -> Tensor:
    """(x1, x2) -> (x1 cos - s x2 sin, x2 cos + s x1 sin) over the halves of the last
    dimension, for s = ``sign`` (-1: the inverse rotation), returned in x's dtype."""
    if x.dtype in (torch.bfloat16, torch.float16):
        # Under autocast: the CPU's half-precision elementwise kernels are slower than its
        # float32 ones (at the default GPT's shape this rotation took 4.2 ms in bfloat16, 1.5 ms
        # through float32), and rounding once at the end is the more accurate anyway.
        return _rotate(x.float(), cos, sin, sign=sign).to(x.dtype)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]  # (..., D/2) each
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)  # (..., D)
    first, second = out[..., :half], out[..., half:]
    torch.mul(x1, cos, out=first).addcmul_(x2, sin, value=-sign)
    torch.mul(x2, cos, out=second).addcmul_(x1, sin, value=sign)
    return out


class KVCache:
    """Preallocated keys and values of one attention layer for incremental decoding.

    It holds the key/value heads only (H_kv of them: fewer than the query heads under
    grouped-query attention), keys already rotated when the model uses RoPE. ``append``
    writes the new keys/values after the cached ones and returns views of everything cached
    so far, so decoding one token costs one copy of that token, not of the whole past.
    """

    def __init__(
        self,
        batch_size: int,
        num_heads: int,
        max_len: int,
        head_dim: int,
        *,
        dtype: torch.dtype,
        device: torch.device | str,
    ) -> None:
        shape = (batch_size, num_heads, max_len, head_dim)
        self.keys = torch.zeros(shape, dtype=dtype, device=device)  # (B, H_kv, T_max, D)
        self.values = torch.zeros(shape, dtype=dtype, device=device)  # (B, H_kv, T_max, D)
        self.length = 0

    @property
    def max_len(self) -> int:
        return self.keys.shape[2]

    def append(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        new_len = self.length + keys.shape[2]
        if new_len > self.max_len:
            raise ValueError(
                f"KV cache overflow: {self.length} cached + {keys.shape[2]} new positions exceed "
                f"its max_len={self.max_len}; allocate a larger cache or crop the sequence"
            )
        self.keys[:, :, self.length : new_len] = keys
        self.values[:, :, self.length : new_len] = values
        self.length = new_len
        return self.keys[:, :, :new_len], self.values[:, :, :new_len]  # (B, H_kv, T_k, D) each


def build_attention_mask(
    *,
    batch_size: int,
    num_heads: int,
    q_len: int,
    k_len: int,
    attention_mask: Tensor | None = None,
    causal: bool = False,
    mask: Tensor | None = None,
    device: torch.device | str | None = None,
) -> tuple[Tensor | None, bool]:
    """Combine a padding mask, a causal flag and an explicit mask into one boolean mask.

    Returns ``(allowed, is_causal)``. ``allowed`` is None (every key allowed) or a boolean tensor
    broadcastable to [B, H, T_q, T_k], True where the query may attend to the key.
    ``is_causal`` is True only for the one case SDPA can do without a mask tensor: causal,
    no other mask, and T_q == T_k (SDPA's ``is_causal`` aligns the triangle top-left).

    The causal triangle is aligned bottom-right: query i sits at absolute position
    ``k_len - q_len + i`` (later than every cached key), so it attends to keys j <= that.
    """
    allowed: Tensor | None = None
    if attention_mask is not None:
        _check_mask_dtype(attention_mask, "attention_mask")
        if attention_mask.dim() != 2 or tuple(attention_mask.shape) != (batch_size, k_len):
            raise ValueError(
                f"attention_mask has shape {tuple(attention_mask.shape)}, expected "
                f"[batch, key_length] = [{batch_size}, {k_len}] (1 for real tokens, 0 for "
                "padding; with a KV cache it covers the cached keys too)"
            )
        allowed = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T_k)
    if mask is not None:
        _check_mask_dtype(mask, "mask")
        target = (batch_size, num_heads, q_len, k_len)
        shape = tuple(mask.shape)
        padded = (1,) * (4 - len(shape)) + shape
        if len(shape) > 4 or any(m not in (1, t) for m, t in zip(padded, target, strict=True)):
            raise ValueError(
                f"mask has shape {shape}, which does not broadcast to [batch, heads, "
                f"query_length, key_length] = {list(target)}"
            )
        explicit = mask.bool().reshape(padded)
        allowed = explicit if allowed is None else allowed & explicit
    if causal:
        if allowed is None and q_len == k_len:
            return None, True
        offset = k_len - q_len
        triangle = torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(offset)
        allowed = triangle if allowed is None else allowed & triangle  # (B|1, H|1, T_q, T_k)
    return allowed, False


def check_head_gate(gate: Tensor, num_heads: int) -> None:
    """A head gate is a float tensor of one multiplier per head, [H]."""
    if not gate.dtype.is_floating_point or tuple(gate.shape) != (num_heads,):
        raise ValueError(
            f"head_gate has shape {tuple(gate.shape)} and dtype {gate.dtype}, expected a float "
            f"tensor of shape [num_heads] = [{num_heads}] (1 keeps a head, 0 removes it)"
        )


def _check_mask_dtype(mask: Tensor, name: str) -> None:
    if mask.dtype.is_floating_point or mask.dtype.is_complex:
        raise ValueError(
            f"{name} has dtype {mask.dtype}; pass a boolean (True = may attend) or 0/1 integer "
            "mask. Additive float masks (0 / -inf) are not accepted because their polarity is "
            "the opposite of ours."
        )


class MultiHeadAttention(nn.Module):
    """Multi-head attention for encoders (padding mask), decoders (causal) and cross-attention.

    Parameter layout, so that a reference implementation's weights map one to one:

    - self-attention (``d_context=None``):
      ``qkv_proj = Linear(d_in, d_model + 2 * kv_dim, bias=qkv_bias)``, kv_dim = H_kv * D, with
      rows ordered [q (d_model rows); k (kv_dim); v (kv_dim)]; within each block, head h owns
      rows ``h * D : (h + 1) * D``. With H_kv = H (the default) that is ``Linear(d_in,
      3 * d_model)``: a fused ``Linear(H, 3H)`` (BERT style) copies in as is; separate
      W_query / W_key / W_value weights are concatenated along rows in that order.
    - cross-attention (``d_context`` given): ``q_proj = Linear(d_in, d_model)``,
      ``k_proj = Linear(d_context, kv_dim)``, ``v_proj = Linear(d_context, kv_dim)``, all with
      ``bias=qkv_bias``; keys come from ``context``, values from ``value`` if given, else from
      ``context``.
    - ``out_proj = Linear(d_model, d_model)`` with bias, in both modes.

    Grouped-query attention (``num_kv_heads`` < ``num_heads``; 1 = multi-query): query head h
    attends with key/value head ``h // (H / H_kv)``, as SDPA's ``enable_gqa`` pairs them.
    Rotary positions (``rotary=`` in forward, self-attention only) rotate queries and keys
    before the KV cache, so the cache holds rotated keys.

    Dropout: ``attn_dropout`` on the attention probabilities, ``proj_dropout`` on the output
    projection; both default to ``dropout`` and are inactive in eval mode.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        *,
        d_in: int | None = None,
        d_context: int | None = None,
        qkv_bias: bool = True,
        attn_dropout: float | None = None,
        proj_dropout: float | None = None,
        num_kv_heads: int | None = None,
    ) -> None:
        super().__init__()
        check_head_count("d_model", d_model, num_heads)
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        check_kv_heads(num_heads, num_kv_heads)
        attn_dropout = dropout if attn_dropout is None else attn_dropout
        proj_dropout = dropout if proj_dropout is None else proj_dropout
        for name, p in (
            ("dropout", dropout),
            ("attn_dropout", attn_dropout),
            ("proj_dropout", proj_dropout),
        ):
            check_dropout(name, p)
        self.d_model = d_model
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = d_model // num_heads
        self.d_in = d_model if d_in is None else d_in
        self.d_context = d_context
        self.attn_dropout = attn_dropout
        kv_dim = num_kv_heads * self.head_dim
        if d_context is None:
            self.qkv_proj = nn.Linear(self.d_in, d_model + 2 * kv_dim, bias=qkv_bias)
        else:
            self.q_proj = nn.Linear(self.d_in, d_model, bias=qkv_bias)
            self.k_proj = nn.Linear(d_context, kv_dim, bias=qkv_bias)
            self.v_proj = nn.Linear(d_context, kv_dim, bias=qkv_bias)
        self.out_proj = nn.Linear(d_model, d_model)
        self.proj_dropout = nn.Dropout(proj_dropout)

    @property
    def is_cross_attention(self) -> bool:
        return self.d_context is not None

    def init_cache(
        self,
        batch_size: int,
        max_len: int,
        *,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> KVCache:
        """An empty KV cache sized for this module."""
        weight = self.out_proj.weight
        return KVCache(
            batch_size,
            self.num_kv_heads,
            max_len,
            self.head_dim,
            dtype=dtype or weight.dtype,
            device=device or weight.device,
        )

    def forward(
        self,
        x: Tensor,
        context: Tensor | None = None,
        *,
        value: Tensor | None = None,
        attention_mask: Tensor | None = None,
        causal: bool = False,
        mask: Tensor | None = None,
        need_weights: bool = False,
        kv_cache: KVCache | None = None,
        rotary: tuple[Tensor, Tensor] | None = None,
        head_gate: Tensor | None = None,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Attend from ``x`` [B, T_q, d_in] to itself or to ``context`` [B, T_k, d_context].

        attention_mask: [B, T_k], 1/True real key, 0/False padding (covers cached keys too).
        causal: query i attends only to keys j <= i (bottom-right aligned with a cache).
        mask: explicit boolean mask broadcastable to [B, H, T_q, T_k], True = may attend.
        need_weights: also return the probabilities [B, H, T_q, T_k] (before dropout); this
            takes the plain path. Otherwise SDPA runs and no score matrix is materialised.
        kv_cache: self-attention only; the new keys/values are appended and all are attended.
        rotary: self-attention only; (cos, sin) of each query's position, [B|1, T_q, D/2] each
            (``RotaryEmbedding``): queries and keys are rotated by them (RoPE).
        head_gate: [H], one multiplier per query head on its output before ``out_proj``
            (0 removes the head, 1 keeps it; a float tensor that requires grad gives dL/dgate,
            the head importance of Michel et al. 2019). None costs nothing.

        A query with no key it may attend to gets zeros, in the output and the gradient.
        """
        self._check_inputs(x, context, value, kv_cache, rotary)
        if head_gate is not None:
            check_head_gate(head_gate, self.num_heads)
        batch_size, q_len, _ = x.shape
        if context is None:
            q, k, v = self._self_attention_heads(x, rotary)
        else:
            if causal and context.shape[1] != q_len:
                raise ValueError(
                    f"causal=True needs keys aligned with queries, but the context has length "
                    f"{context.shape[1]} and x has length {q_len}; causal cross-attention over "
                    "a context of another length is undefined, pass an explicit mask instead"
                )
            q = self._heads(self.q_proj(x), self.num_heads)  # (B, H, T_q, D)
            k = self._heads(self.k_proj(context), self.num_kv_heads)  # (B, H_kv, T_k, D)
            v = self._heads(self.v_proj(context if value is None else value), self.num_kv_heads)
        if kv_cache is not None:
            k, v = kv_cache.append(k, v)  # (B, H_kv, T_k, D) each, past included
        allowed, is_causal = build_attention_mask(
            batch_size=batch_size,
            num_heads=self.num_heads,
            q_len=q_len,
            k_len=k.shape[2],
            attention_mask=attention_mask,
            causal=causal,
            mask=mask,
            device=x.device,
        )
        has_key = None
        if allowed is not None:
            # A row with no allowed key would softmax to NaN; let it attend everywhere, then
            # zero its output, so both paths and the gradient stay finite.
            has_key = allowed.any(dim=-1, keepdim=True)  # (B|1, H|1, T_q|1, 1)
            if has_key.device.type == "cpu" and bool(has_key.all()):
                # On the host this check costs microseconds and, in the usual case where every
                # row has a key, saves a masked copy of the output in forward and backward
                # (~5% at small shapes). On an accelerator it would stall the stream, so there
                # the fill below always runs.
                has_key = None
            else:
                allowed = allowed | ~has_key
        dropout_p = self.attn_dropout if self.training else 0.0
        if need_weights:
            context_vec, probs = self._plain_attention(q, k, v, allowed, is_causal, dropout_p)
        else:
            context_vec = F.scaled_dot_product_attention(
                q,
                k,
                v,
                attn_mask=allowed,
                dropout_p=dropout_p,
                is_causal=is_causal,
                enable_gqa=self.num_kv_heads != self.num_heads,
            )  # (B, H, T_q, D)
        if has_key is not None:
            context_vec = context_vec.masked_fill(~has_key, 0.0)
        if head_gate is not None:
            # Per query head (under GQA too): the gate scales what each head writes.
            context_vec = context_vec * head_gate.to(context_vec.dtype)[:, None, None]
        context_vec = context_vec.transpose(1, 2).reshape(batch_size, q_len, self.d_model)
        out = self.proj_dropout(self.out_proj(context_vec))  # (B, T_q, d_model)
        if not need_weights:
            return out
        if has_key is not None:
            probs = probs.masked_fill(~has_key, 0.0)
        return out, probs

    def _self_attention_heads(
        self, x: Tensor, rotary: tuple[Tensor, Tensor] | None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The fused projection of x [B, T, d_in] split into q [B, H, T, D] and k, v
        [B, H_kv, T, D], queries and keys rotated when ``rotary`` is given."""
        batch_size, length, _ = x.shape
        qk_heads = self.num_heads + self.num_kv_heads
        heads = self.qkv_proj(x).view(batch_size, length, qk_heads + self.num_kv_heads, -1)
        qk, v = heads[:, :, :qk_heads], heads[:, :, qk_heads:]  # (B, T, H + H_kv | H_kv, D)
        if rotary is not None:
            cos, sin = rotary
            # Queries and keys in one pass; [B|1, T, 1, D] broadcasts over their heads.
            qk = apply_rotary(qk, cos[:, :, None], sin[:, :, None])  # (B, T, H + H_kv, D)
        q, k = qk.transpose(1, 2).split([self.num_heads, self.num_kv_heads], dim=1)
        return q, k, v.transpose(1, 2)  # (B, H, T, D), (B, H_kv, T, D), (B, H_kv, T, D)

    def _heads(self, projected: Tensor, num_heads: int) -> Tensor:
        """[B, T, n * D] -> [B, n, T, D] for n = ``num_heads``."""
        batch_size, length, _ = projected.shape
        heads = projected.view(batch_size, length, num_heads, self.head_dim)  # (B, T, n, D)
        return heads.transpose(1, 2)  # (B, n, T, D)

    def _plain_attention(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        allowed: Tensor | None,
        is_causal: bool,
        dropout_p: float,
    ) -> tuple[Tensor, Tensor]:
        """Explicit softmax(QK^T / sqrt(D)) V, returning the probabilities before dropout."""
        if self.num_kv_heads != self.num_heads:
            group = self.num_heads // self.num_kv_heads
            k = k.repeat_interleave(group, dim=1)  # (B, H, T_k, D): head h uses h // group
            v = v.repeat_interleave(group, dim=1)  # (B, H, T_k, D)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)  # (B, H, T_q, T_k)
        if is_causal:
            allowed = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device).tril()
        if allowed is not None:
            # finfo.min rather than -inf: safe in fp16/bf16 and never NaN after the softmax.
            scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        probs = torch.softmax(scores, dim=-1)  # (B, H, T_q, T_k)
        attended = F.dropout(probs, p=dropout_p, training=dropout_p > 0)
        return attended @ v, probs  # (B, H, T_q, D), (B, H, T_q, T_k)

    def _check_inputs(
        self,
        x: Tensor,
        context: Tensor | None,
        value: Tensor | None,
        kv_cache: KVCache | None,
        rotary: tuple[Tensor, Tensor] | None,
    ) -> None:
        if x.dim() != 3 or x.shape[-1] != self.d_in:
            raise ValueError(
                f"x has shape {tuple(x.shape)}, expected [batch, length, d_in={self.d_in}]"
            )
        if self.is_cross_attention:
            if context is None:
                raise ValueError(
                    f"this module was built for cross-attention (d_context={self.d_context}); "
                    "pass context=[batch, context_length, d_context]"
                )
            for name, t in (("context", context), ("value", value)):
                if t is None:
                    continue
                if t.dim() != 3 or t.shape[-1] != self.d_context or t.shape[0] != x.shape[0]:
                    raise ValueError(
                        f"{name} has shape {tuple(t.shape)}, expected [batch={x.shape[0]}, "
                        f"context_length, d_context={self.d_context}]"
                    )
            if value is not None and value.shape[1] != context.shape[1]:
                raise ValueError(
                    f"value has length {value.shape[1]} but context (the keys) has length "
                    f"{context.shape[1]}; every key needs exactly one value"
                )
            if kv_cache is not None:
                raise ValueError("kv_cache is for self-attention; cross-attention keys are fixed")
            if rotary is not None:
                raise ValueError(
                    "rotary is for self-attention: queries and keys of a cross-attention have "
                    "no common positions; leave rotary=None"
                )
        elif context is not None or value is not None:
            raise ValueError(
                "context/value given to a self-attention module; build it with "
                "d_context=<context width> for cross-attention"
            )
