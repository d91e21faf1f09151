"""Where each token sits: position ids (padding and KV cache aware), the sinusoidal table,
and the layout of a block packed from several documents (notation of ``models/transformer``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from models.attention import KVCache


def sinusoidal_table(num_positions: int, dim: int) -> Tensor:
    """Fixed sin/cos position encodings of "Attention Is All You Need", shape [T, C]."""
    position = torch.arange(num_positions, dtype=torch.float32)[:, None]  # (T, 1)
    inv_freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(1e4) / dim))
    angles = position * inv_freq  # (T, ceil(C / 2))
    table = torch.zeros(num_positions, dim)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles)[:, : dim // 2]  # an odd C has one cos column fewer
    return table  # (T, C)


def position_ids(
    attention_mask: Tensor | None,
    length: int,
    past_length: int = 0,
    device: torch.device | str | None = None,
) -> Tensor:
    """Positions of the last ``length`` tokens, counting real tokens only, so padding moves
    no real token (``attention_mask`` covers cached tokens too). Left padding gets position 0,
    right padding repeats the last real position: both are masked as keys anyway."""
    if attention_mask is None:
        return torch.arange(past_length, past_length + length, device=device)[None, :]  # (1, T)
    positions = attention_mask.long().cumsum(dim=-1) - 1  # (B, T_k)
    return positions.clamp(min=0)[:, -length:]  # (B, T)


def document_layout(document_ids: Tensor) -> tuple[Tensor, Tensor]:
    """Document ids [B, T] -> (same-document mask [B, 1, T, T], positions from 0 in each
    document [B, T]). A document is a run of equal ids, so ids that recur later (0, 1, 0) name
    three documents and mask and positions always agree; causal attention adds the triangle."""
    _, length = document_ids.shape
    starts = torch.ones_like(document_ids, dtype=torch.bool)  # (B, T)
    starts[:, 1:] = document_ids[:, 1:] != document_ids[:, :-1]
    run = starts.cumsum(dim=-1)  # (B, T): the run each token belongs to
    same_document = run[:, :, None] == run[:, None, :]  # (B, T, T)
    index = torch.arange(length, device=document_ids.device).expand_as(document_ids)  # (B, T)
    # A token's run began at the last start at or before it.
    run_start = torch.where(starts, index, 0).cummax(dim=-1).values  # (B, T)
    return same_document[:, None], index - run_start  # (B, 1, T, T), (B, T)


def check_document_ids(
    document_ids: Tensor,
    input_ids: Tensor,
    attention_mask: Tensor | None,
    kv_caches: list[KVCache] | None,
) -> None:
    """Document ids are integers, one per token, and go without a KV cache or padding."""
    dtype = document_ids.dtype
    if dtype.is_floating_point or dtype.is_complex or dtype == torch.bool:
        raise ValueError(
            f"document_ids has dtype {document_ids.dtype}; pass integer ids [batch, length] "
            "(the document of each token, e.g. the number of EOS tokens before it)"
        )
    if tuple(document_ids.shape) != tuple(input_ids.shape):
        raise ValueError(
            f"document_ids has shape {tuple(document_ids.shape)}, expected the shape of "
            f"input_ids {tuple(input_ids.shape)}: one document id per token"
        )
    if kv_caches is not None:
        raise ValueError(
            "document_ids cannot be combined with kv_caches: the cache holds keys at absolute "
            "positions of one sequence; generate without document_ids (a prompt is one document)"
        )
    if attention_mask is not None:
        raise ValueError(
            "document_ids cannot be combined with attention_mask; give the padding a document "
            "id of its own (its tokens then attend only to padding) and drop attention_mask"
        )
