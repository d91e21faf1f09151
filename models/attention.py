"""The one multi-head attention module of tinylm, and the one function that builds its masks
(ARCHITECTURE.md, "The mask convention").

Notation: B batch, H heads, H_kv key/value heads (fewer under grouped-query attention), T_q
query length, T_k key length (cached keys included), D head width, d_model = H * D.
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
    """The cos/sin tables of rotary position embeddings (RoPE, Su et al. 2021): position p
    rotates the pair of head dimensions (i, i + D/2) by p * ROPE_BASE^(-2i/D), the half-split
    pairing of GPT-NeoX and Llama (cheaper than interleaved pairs)."""

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
        """Positions [B|1, T] -> (cos, sin), [B|1, T, D/2] each."""
        return F.embedding(positions, self.cos), F.embedding(positions, self.sin)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate each pair (x_i, x_{i + D/2}) of the last dimension by cos/sin [..., D/2] (no
    gradient flows into the tables)."""
    if torch.compiler.is_compiling():
        # torch.compile fuses the textbook formula, where the Function's writes into slices
        # would break the graph. In x's dtype: under autocast the tables stay float32.
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]  # (..., D/2) each
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)  # (..., D)
    return _Rotation.apply(x, cos, sin)


class _Rotation(torch.autograd.Function):
    """RoPE's rotation with its backward (the inverse rotation) written out: four half-size
    kernels each way, where autograd of the textbook formula runs about twice as many, which
    is what matters at small shapes on the CPU."""

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
    dimension, s = ``sign`` (-1: the inverse rotation)."""
    if x.dtype in (torch.bfloat16, torch.float16):
        # The CPU's half-precision kernels are slower (4.2 ms against 1.5 ms at the default
        # GPT's shape), and rounding once at the end is the more accurate anyway.
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
    """Preallocated keys (rotated under RoPE) and values of one layer's H_kv heads: decoding a
    token copies that token only, and ``append`` returns views of everything cached."""

    def __init__(self, shape: tuple[int, int, int, int], like: Tensor) -> None:
        self.keys = like.new_zeros(shape)  # (B, H_kv, T_max, D), like's dtype and device
        self.values = like.new_zeros(shape)  # (B, H_kv, T_max, D)
        self.length = 0

    def append(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        new_len = self.length + keys.shape[2]
        if new_len > self.keys.shape[2]:
            raise ValueError(
                f"KV cache overflow: {self.length} cached + {keys.shape[2]} new positions exceed "
                f"its max_len={self.keys.shape[2]}; allocate a larger cache or crop the sequence"
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
    """Padding mask, causal flag and explicit mask -> ``(allowed, is_causal)``: ``allowed`` is
    None or a boolean tensor broadcastable to [B, H, T_q, T_k]; ``is_causal`` only where SDPA
    needs no tensor (causal alone, T_q == T_k: its triangle is aligned top-left). Ours is
    aligned bottom-right, so queries after a KV cache see every cached key."""
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


def check_head_gate(name: str, gate: Tensor, **dims: int) -> None:
    """A head gate is a float tensor of one multiplier per head, of the shape ``dims``."""
    expected = tuple(dims.values())
    if not gate.dtype.is_floating_point or tuple(gate.shape) != expected:
        raise ValueError(
            f"{name} has shape {tuple(gate.shape)} and dtype {gate.dtype}, expected a float "
            f"tensor of shape [{', '.join(dims)}] = {list(expected)} (1 keeps a head, 0 "
            "removes it)"
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

    The parameters are laid out so that a reference implementation's weights map one to one:
    self-attention has ``qkv_proj`` with rows [q (d_model); k (H_kv * D); v (H_kv * D)], head h
    owning rows h * D : (h + 1) * D of each block (a fused BERT-style Linear copies in as is,
    separate W_query / W_key / W_value concatenate in that order); cross-attention
    (``d_context`` given) has ``q_proj``, ``k_proj`` and ``v_proj``; both have ``out_proj``.
    Under grouped-query attention query head h uses key/value head h // (H / H_kv), as SDPA's
    ``enable_gqa`` pairs them. ``attn_dropout`` (on the probabilities) and ``proj_dropout`` (on
    the output) default to ``dropout``. ``scale`` multiplies the scores instead of
    1 / sqrt(D) (μP's 1 / D, ``ModelConfig.attention_scale``). ``qk_norm`` RMS-normalises
    each head's query and key (no learned gain) before the rotation, so a score is at most
    sqrt(D) whatever the weights' growth.
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
        scale: float | None = None,
        qk_norm: bool = False,
    ) -> None:
        super().__init__()
        check_head_count("d_model", d_model, num_heads)
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        check_kv_heads(num_heads, num_kv_heads)
        attn_dropout = dropout if attn_dropout is None else attn_dropout
        proj_dropout = dropout if proj_dropout is None else proj_dropout
        rates = {"dropout": dropout, "attn_dropout": attn_dropout, "proj_dropout": proj_dropout}
        for name, p in rates.items():
            check_dropout(name, p)
        self.d_model = d_model
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = d_model // num_heads
        self.d_in = d_model if d_in is None else d_in
        self.d_context = d_context
        self.attn_dropout = attn_dropout
        self.scale = scale
        self.qk_norm = qk_norm
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

    def init_cache(self, batch_size: int, max_len: int) -> KVCache:
        """An empty KV cache sized for this module, in its weights' dtype and device."""
        shape = (batch_size, self.num_kv_heads, max_len, self.head_dim)
        return KVCache(shape, self.out_proj.weight)

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
        extra_values: Tensor | None = None,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Attend from ``x`` [B, T_q, d_in] to itself or to ``context`` [B, T_k, d_context]
        (values from ``value`` if given).

        attention_mask: [B, T_k], 1 real key, 0 padding (covers cached keys too).
        mask: explicit boolean mask broadcastable to [B, H, T_q, T_k], True = may attend.
        need_weights: also return the probabilities [B, H, T_q, T_k] (before dropout) from the
            plain path; otherwise SDPA runs and no score matrix is materialised.
        kv_cache, rotary: self-attention only; rotary is the (cos, sin) of each query's
            position, [B|1, T_q, D/2] each, applied to queries and keys before the cache.
        head_gate: [H], a multiplier on each query head's output before ``out_proj``; with
            requires_grad, dL/dgate is the head importance of Michel et al. 2019.
        extra_values: [B, T_q, H_kv * D], added to the values of self-attention before the
            cache (a value embedding of each token).

        A query with no key it may attend to gets zeros, in the output and the gradient.
        """
        self._check_inputs(x, context, value, kv_cache, rotary, extra_values)
        if head_gate is not None:
            check_head_gate("head_gate", head_gate, num_heads=self.num_heads)
        batch_size, q_len, _ = x.shape
        if context is None:
            q, k, v = self._self_attention_heads(x, rotary)
            if extra_values is not None:
                v = v + self._heads(extra_values, self.num_kv_heads)  # (B, H_kv, T, D)
        else:
            if causal and context.shape[1] != q_len:
                raise ValueError(
                    f"causal=True needs keys aligned with queries, but the context has length "
                    f"{context.shape[1]} and x has length {q_len}; causal cross-attention over "
                    "a context of another length is undefined, pass an explicit mask instead"
                )
            q = self._normed(self._heads(self.q_proj(x), self.num_heads))  # (B, H, T_q, D)
            k = self._normed(self._heads(self.k_proj(context), self.num_kv_heads))
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
                # Saves the masked copies (~5% at small shapes); on an accelerator this sync
                # would stall the stream.
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
                scale=self.scale,
                enable_gqa=self.num_kv_heads != self.num_heads,
            )  # (B, H, T_q, D)
        if has_key is not None:
            context_vec = context_vec.masked_fill(~has_key, 0.0)
        if head_gate is not None:
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
        """x [B, T, d_in] -> q [B, H, T, D], k and v [B, H_kv, T, D], q and k rotated."""
        batch_size, length, _ = x.shape
        qk_heads = self.num_heads + self.num_kv_heads
        heads = self.qkv_proj(x).view(batch_size, length, qk_heads + self.num_kv_heads, -1)
        qk, v = heads[:, :, :qk_heads], heads[:, :, qk_heads:]  # (B, T, H + H_kv | H_kv, D)
        qk = self._normed(qk)
        if rotary is not None:
            cos, sin = rotary
            qk = apply_rotary(qk, cos[:, :, None], sin[:, :, None])  # (B, T, H + H_kv, D)
        q, k = qk.transpose(1, 2).split([self.num_heads, self.num_kv_heads], dim=1)
        return q, k, v.transpose(1, 2)  # (B, H, T, D), (B, H_kv, T, D), (B, H_kv, T, D)

    def _normed(self, heads: Tensor) -> Tensor:
        """Each head's vector [..., D] at unit RMS under ``qk_norm``; as it is otherwise."""
        return F.rms_norm(heads, (self.head_dim,)) if self.qk_norm else heads

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
        """Explicit softmax(QK^T / sqrt(D)) V (``scale`` instead of 1 / sqrt(D) when given),
        returning the probabilities before dropout."""
        if self.num_kv_heads != self.num_heads:
            group = self.num_heads // self.num_kv_heads
            k = k.repeat_interleave(group, dim=1)  # (B, H, T_k, D): head h uses h // group
            v = v.repeat_interleave(group, dim=1)  # (B, H, T_k, D)
        scores = q @ k.transpose(-2, -1)  # (B, H, T_q, T_k)
        scores = scores / math.sqrt(self.head_dim) if self.scale is None else scores * self.scale
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
        extra_values: Tensor | None,
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
                if t is not None and (
                    t.dim() != 3 or t.shape[-1] != self.d_context or t.shape[0] != x.shape[0]
                ):
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
            if extra_values is not None:
                raise ValueError("extra_values are for self-attention; pass value= instead")
        elif extra_values is not None and tuple(extra_values.shape) != (
            *x.shape[:2],
            self.num_kv_heads * self.head_dim,
        ):
            raise ValueError(
                f"extra_values has shape {tuple(extra_values.shape)}, expected [batch, length, "
                f"num_kv_heads * head_dim = {self.num_kv_heads * self.head_dim}]"
            )
        elif context is not None or value is not None:
            raise ValueError(
                "context/value given to a self-attention module; build it with "
                "d_context=<context width> for cross-attention"
            )
