"""features/heads/statistics.py: per-head ablation, importance, entropy, shares and the prune
curve, each checked against a computation written apart (a hook that zeroes a head's slice, finite
differences, uniform attention)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from data.collate import IGNORE_INDEX
from features.heads.statistics import (
    Head,
    head_stats,
    heads_for_share,
    heads_to_prune,
    parse_heads,
    prune_curve,
    prune_order,
)
from tests.tiny_models import VOCAB, tiny_model


def _batches(arch: str, count: int = 2, length: int = 8) -> list[dict[str, Tensor]]:
    generator = torch.Generator().manual_seed(7)
    batches = []
    for i in range(count):
        ids = torch.randint(0, VOCAB, (2, length), generator=generator)
        labels = torch.randint(0, VOCAB, (2, length), generator=generator)
        batch = {"input_ids": ids, "labels": labels}
        if arch == "encoder":  # padding, and targets at some tokens only
            mask = torch.ones(2, length, dtype=torch.long)
            mask[1, length - 2 - i :] = 0
            labels[mask == 0] = IGNORE_INDEX
            labels[:, ::2] = IGNORE_INDEX
            batch["attention_mask"] = mask
        batches.append(batch)
    return batches


def _loss_with_slice_zeroed(
    model: nn.Module, batches: list[dict[str, Tensor]], head: Head | None
) -> float:
    """The token-weighted loss with ``head``'s slice of ``out_proj``'s input zeroed by a hook
    (None: no hook), from the logits and labels directly."""
    handle = None
    if head is not None:
        module = model.blocks[head.layer].attn

        def zero(_: nn.Module, args: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
            heads = args[0].unflatten(-1, (module.num_heads, module.head_dim)).clone()
            heads[..., head.head, :] = 0.0  # (B, T, H, D)
            return (heads.flatten(-2),)

        handle = module.out_proj.register_forward_pre_hook(zero)
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in batches:
            logits = model(batch["input_ids"], batch.get("attention_mask"))
            total += float(
                F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), reduction="sum")
            )
            count += int((batch["labels"] != IGNORE_INDEX).sum())
    if handle is not None:
        handle.remove()
    return total / count


@pytest.fixture(scope="module", params=["decoder", "encoder"])
def analysed(request: pytest.FixtureRequest):
    torch.manual_seed(5)
    model = tiny_model(request.param, num_kv_heads=2).double()
    batches = _batches(request.param)
    return model, batches, head_stats(model, batches)


def test_delta_loss_equals_the_loss_with_the_heads_slice_zeroed_by_a_hook(analysed) -> None:
    model, batches, stats = analysed
    base = _loss_with_slice_zeroed(model, batches, None)
    assert stats.base_loss == pytest.approx(base, abs=1e-9)
    assert stats.tokens == sum(int((b["labels"] != IGNORE_INDEX).sum()) for b in batches)
    weights = [int((b["labels"] != IGNORE_INDEX).sum()) for b in batches]
    for row in stats.rows():
        head = Head(row["layer"], row["head"])
        ablated = _loss_with_slice_zeroed(model, batches, head)
        assert row["delta_loss"] == pytest.approx(ablated - base, abs=1e-9)
        # Paired: the SE of the token-weighted mean of each batch's own difference.
        deltas = [
            _loss_with_slice_zeroed(model, [b], head) - _loss_with_slice_zeroed(model, [b], None)
            for b in batches
        ]
        mean = sum(w * d for w, d in zip(weights, deltas, strict=True)) / sum(weights)
        spread = sum(w**2 * (d - mean) ** 2 for w, d in zip(weights, deltas, strict=True))
        se = math.sqrt(spread * len(batches) / (len(batches) - 1)) / sum(weights)
        assert row["delta_loss_se"] == pytest.approx(se, rel=1e-6)


def test_importance_equals_finite_differences_of_the_gate(analysed) -> None:
    model, batches, stats = analysed
    eps = 1e-5
    cfg = model.config
    for layer in range(cfg.num_layers):
        for head in range(cfg.num_heads):
            total, count = 0.0, 0
            for batch in batches:
                losses = []
                for sign in (1, -1):
                    mask = torch.ones(cfg.num_layers, cfg.num_heads, dtype=torch.float64)
                    mask[layer, head] += sign * eps
                    with torch.no_grad():
                        logits = model(
                            batch["input_ids"], batch.get("attention_mask"), head_mask=mask
                        )
                    labels = batch["labels"]
                    n = int((labels != IGNORE_INDEX).sum())
                    losses.append(float(F.cross_entropy(logits.flatten(0, 1), labels.flatten())))
                total += n * abs(losses[0] - losses[1]) / (2 * eps)
                count += n
            assert stats.importance[layer][head] == pytest.approx(total / count, rel=1e-5)


def test_the_shares_are_probabilities_and_entropy_is_below_uniform(analysed) -> None:
    _, _, stats = analysed
    for row in stats.rows():
        assert 0 < row["entropy"] <= stats.entropy_uniform + 1e-9
        for share in ("previous_share", "first_share", "self_share"):
            assert 0 < row[share] < 1


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_uniform_attention_has_the_entropy_of_log_keys(arch: str) -> None:
    """Queries of zero give every allowed key the same score: each row is uniform."""
    torch.manual_seed(6)
    model = tiny_model(arch).double()
    d_model = model.config.hidden_size
    with torch.no_grad():
        for block in model.blocks:
            block.attn.qkv_proj.weight[:d_model] = 0.0
            block.attn.qkv_proj.bias[:d_model] = 0.0
    length = 9
    batch = {
        "input_ids": torch.randint(0, VOCAB, (2, length)),
        "labels": torch.randint(0, VOCAB, (2, length)),
    }
    stats = head_stats(model, [batch])
    if arch == "decoder":  # query i sees i + 1 keys
        expected = sum(math.log(i + 1) for i in range(length)) / length
        first = sum(1 / (i + 1) for i in range(length)) / length
        previous = sum(1 / (i + 1) for i in range(1, length)) / (length - 1)
    else:
        expected, first, previous = math.log(length), 1 / length, 1 / length
    assert stats.entropy_uniform == pytest.approx(expected, abs=1e-9)
    for row in stats.rows():
        assert row["entropy"] == pytest.approx(expected, abs=1e-9)
        assert row["first_share"] == pytest.approx(first, abs=1e-9)
        assert row["self_share"] == pytest.approx(first, abs=1e-9)
        assert row["previous_share"] == pytest.approx(previous, abs=1e-9)


def test_the_prune_curve_runs_from_base_loss_to_one_head_per_layer(analysed) -> None:
    model, batches, stats = analysed
    curve = prune_curve(model, batches, stats)
    cfg = model.config
    total = cfg.num_layers * cfg.num_heads
    assert curve[0] == {"removed_fraction": 0.0, "removed": [], "loss": stats.base_loss}
    last = [Head(*map(int, h.split(":"))) for h in curve[-1]["removed"]]
    assert len(last) == total - cfg.num_layers
    assert sorted({h.layer for h in last}) == list(range(cfg.num_layers))
    for layer in range(cfg.num_layers):
        assert sum(h.layer == layer for h in last) == cfg.num_heads - 1
    fractions = [p["removed_fraction"] for p in curve]
    assert fractions == sorted(set(fractions))
    for point in curve:  # each point removes the least important heads, then scores them
        removed = [Head(*map(int, h.split(":"))) for h in point["removed"]]
        assert removed == prune_order(stats.importance)[: len(removed)]
        expected = _loss_with_slice_zeroed_all(model, batches, removed)
        assert point["loss"] == pytest.approx(expected, abs=1e-9)


def _loss_with_slice_zeroed_all(model: nn.Module, batches, heads: list[Head]) -> float:
    if not heads:
        return _loss_with_slice_zeroed(model, batches, None)
    mask = torch.ones(model.config.num_layers, model.config.num_heads, dtype=torch.float64)
    for h in heads:
        mask[h.layer, h.head] = 0.0
    total, count = 0.0, 0
    with torch.no_grad():
        for b in batches:
            logits = model(b["input_ids"], b.get("attention_mask"), head_mask=mask)
            total += float(
                F.cross_entropy(logits.flatten(0, 1), b["labels"].flatten(), reduction="sum")
            )
            count += int((b["labels"] != IGNORE_INDEX).sum())
    return total / count


def test_prune_order_never_empties_a_layer_and_fractions_round() -> None:
    importance = [[0.1, 0.0, 0.3], [0.05, 0.2, 0.01]]
    order = prune_order(importance)
    assert [str(h) for h in order] == ["0:1", "1:2", "1:0", "0:0"]
    assert [str(h) for h in heads_to_prune(importance, 0.5)] == ["0:1", "1:2", "1:0"]
    assert heads_to_prune(importance, 1.0) == order
    assert heads_to_prune(importance, 0.0) == []
    assert heads_for_share(importance, 0.9) == [2, 2]
    assert heads_for_share([[1.0, 0.0], [0.0, 0.0]], 0.9) == [1, 1]


def test_explicit_heads_are_parsed_and_checked() -> None:
    assert parse_heads(["0:1", "1:3", "0:1"], 2, 4) == [Head(0, 1), Head(1, 3)]
    for name in ("1:4", "2:0"):
        with pytest.raises(ValueError, match="outside the checkpoint's layers 0-1 and heads 0-3"):
            parse_heads([name], 2, 4)
