"""The three reference designs tinylm's attention unifies, each in its own formulation: 000, a
BERT-style fused-QKV self-attention with a [B, T] padding mask; 003, a cross-attention with
separate Q/K/V/O projections that returns its probabilities; 004, a GPT-style causal attention
with d_in != d_out.

The oracle of tests/models/test_attention.py, which copies their weights into ``MultiHeadAttention``
and compares outputs. (bench/attention.py times the module's own plain path instead: a
benchmark imports no test code.)
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


class Seed000SelfAttention(nn.Module):
    """Seed 000: BERT-style fused qkv, [B, T] padding mask filled with -1e4 before softmax."""

    def __init__(self, hidden_size: int, num_heads: int, dropout_prob: float = 0.1) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.qkv = nn.Linear(hidden_size, 3 * hidden_size)
        self.out = nn.Linear(hidden_size, hidden_size)
        self.attn_drop = nn.Dropout(dropout_prob)
        self.proj_drop = nn.Dropout(dropout_prob)

    def forward(self, x: Tensor, attention_mask: Tensor) -> Tensor:
        q, k, v = torch.split(self.qkv(x), self.hidden_size, dim=-1)  # (B, T, H) each
        b, t, d = x.shape
        q = q.reshape(b, t, self.num_heads, self.head_dim).permute(0, 2, 1, 3)
        k = k.reshape(b, t, self.num_heads, self.head_dim).permute(0, 2, 1, 3)
        v = v.reshape(b, t, self.num_heads, self.head_dim).permute(0, 2, 1, 3)
        scores = q @ k.permute(0, 1, 3, 2) / self.head_dim**0.5  # (B, nh, T, T)
        scores = scores.masked_fill(attention_mask.reshape(b, 1, 1, t) == 0, -1e4)
        probs = self.attn_drop(torch.softmax(scores, dim=-1))
        out = (probs @ v).permute(0, 2, 1, 3).reshape(b, t, d)  # (B, T, H)
        return self.proj_drop(self.out(out))


class Seed003Attention(nn.Module):
    """Seed 003: separate Wq/Wk/Wv/Wo, query/key/value inputs, -1e10 fill, returns probs."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.d_model = d_model
        self.n_heads = n_heads
        self.d_key = d_model // n_heads
        self.Wq = nn.Linear(d_model, d_model)
        self.Wk = nn.Linear(d_model, d_model)
        self.Wv = nn.Linear(d_model, d_model)
        self.Wo = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(p=dropout)

    def forward(
        self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        batch_size = key.size(0)
        q = self.Wq(query).view(batch_size, -1, self.n_heads, self.d_key).permute(0, 2, 1, 3)
        k = self.Wk(key).view(batch_size, -1, self.n_heads, self.d_key).permute(0, 2, 1, 3)
        v = self.Wv(value).view(batch_size, -1, self.n_heads, self.d_key).permute(0, 2, 1, 3)
        scaled = torch.matmul(q, k.permute(0, 1, 3, 2)) / math.sqrt(self.d_key)  # (B,h,Tq,Tk)
        if mask is not None:
            scaled = scaled.masked_fill(mask == 0, -1e10)
        attn_probs = torch.softmax(scaled, dim=-1)
        a = torch.matmul(self.dropout(attn_probs), v)  # (B, h, T_q, d_key)
        a = a.permute(0, 2, 1, 3).contiguous().view(batch_size, -1, self.n_heads * self.d_key)
        return self.Wo(a), attn_probs


class Seed004CausalAttention(nn.Module):
    """Seed 004 (LLMs from scratch, listing 3.5): d_in != d_out, registered triu mask, -inf."""

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        qkv_bias: bool = False,
    ) -> None:
        super().__init__()
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer(
            "mask", torch.triu(torch.ones(context_length, context_length), diagonal=1)
        )

    def forward(self, x: Tensor) -> Tensor:
        b, num_tokens, _ = x.shape
        shape = (b, num_tokens, self.num_heads, self.head_dim)
        keys = self.W_key(x).view(shape).transpose(1, 2)  # (b, h, T, hd)
        queries = self.W_query(x).view(shape).transpose(1, 2)
        values = self.W_value(x).view(shape).transpose(1, 2)
        attn_scores = queries @ keys.transpose(2, 3)  # (b, h, T, T)
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = self.dropout(torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1))
        context_vec = (attn_weights @ values).transpose(1, 2)  # (b, T, h, hd)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)
