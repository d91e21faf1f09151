"""The next token from a decoder's last-position logits: greedy, temperature, top-k, top-p
(``Decoder.generate``'s draw and its argument checks)."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def check_sampling_args(
    max_new_tokens: int, temperature: float, top_k: int | None, top_p: float | None
) -> None:
    if (
        isinstance(max_new_tokens, bool)
        or not isinstance(max_new_tokens, int)
        or max_new_tokens < 0
    ):
        raise ValueError(f"max_new_tokens={max_new_tokens!r} must be an int >= 0")
    if not (isinstance(temperature, (int, float)) and 0 <= temperature < math.inf):
        raise ValueError(
            f"temperature={temperature!r} must be a finite number >= 0 (0 = greedy, 1 = the "
            "model's distribution, higher = flatter)"
        )
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0):
        raise ValueError(f"top_k={top_k!r} must be None or 0 (no top-k), or a positive int")
    if top_p is not None and not (isinstance(top_p, (int, float)) and 0 < top_p <= 1):
        raise ValueError(f"top_p={top_p!r} must be in (0, 1] (1 = no nucleus filtering)")


def sample_next_token(
    logits: Tensor,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
    generator: torch.Generator | None,
) -> Tensor:
    """Next token ids [B] from last-position logits [B, V]."""
    if temperature == 0:
        return logits.argmax(dim=-1)  # (B,)
    logits = logits.float() / temperature
    if top_k:
        kth_best = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth_best, -math.inf)
    probs = torch.softmax(logits, dim=-1)  # (B, V)
    if top_p is not None and top_p < 1:
        sorted_probs, order = probs.sort(dim=-1, descending=True)  # (B, V) each
        # Drop a token once the more likely ones already reach top_p; the best always stays.
        drop_sorted = sorted_probs.cumsum(dim=-1) - sorted_probs >= top_p  # (B, V)
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)  # (B, V)
        probs = probs.masked_fill(drop, 0.0)  # multinomial renormalises
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (B,)
