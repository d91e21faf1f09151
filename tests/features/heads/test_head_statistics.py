"""The head analysis (features/heads/statistics.py) recounted apart on untrained tiny networks
in seconds: every field of ``head_stats`` (ablation with its paired standard error over three
batches, importance, entropy, the previous/first/self shares and the uniform entropy) from the
network's own attention probabilities and losses, by plain loops over queries and keys, for
an encoder with padding, a decoder, a decoder with packed documents and a single query with
a previous token; ``head_importance`` alone; the head masks' dtype and device and the
attention sums' device (on the meta device: a CPU tensor among them fails); the prune curve's
points, fractions and cost; the share of importance met up to rounding; the refusal of no
batches. (tests/features/heads/test_heads.py checks the same statistics on larger cases
against hooks, finite differences and uniform attention.)"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from data.collate import IGNORE_INDEX
from features.heads.statistics import (
    Head,
    HeadStats,
    all_ones,
    attention_sums,
    gated_off,
    head_importance,
    head_stats,
    heads_for_share,
    importance_and_attention,
    prune_curve,
    weighted_mean_and_se,
)
from tests.tiny_models import VOCAB, tiny_model

Batch = dict[str, Tensor]


def _inputs(batch: Batch) -> dict[str, Tensor]:
    """The batch's padding mask and document ids, those it has, as the network's keywords."""
    return {k: batch[k] for k in ("attention_mask", "document_ids") if k in batch}


def _targets(batch: Batch) -> int:
    return int((batch["labels"] != IGNORE_INDEX).sum())


def _loss(model: nn.Module, batch: Batch, gate: Tensor) -> Tensor:
    """Mean cross-entropy over the batch's targets with every head scaled by ``gate`` [L, H]."""
    logits = model(batch["input_ids"], **_inputs(batch), head_mask=gate)
    summed = F.cross_entropy(
        logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE_INDEX, reduction="sum"
    )
    return summed / _targets(batch)


def _gate_of_ones(model: nn.Module) -> Tensor:
    cfg = model.config
    return torch.ones(cfg.num_layers, cfg.num_heads, dtype=torch.float64)


def _weighted_mean(values: list[float], weights: list[int]) -> float:
    return sum(w * v for w, v in zip(weights, values, strict=True)) / sum(weights)


def _weighted_se(values: list[float], weights: list[int]) -> float:
    """The ratio estimator's standard error: sqrt(n / (n - 1) sum w^2 (x - mean)^2) / sum w."""
    n = len(values)
    if n == 1:
        return 0.0
    mean = _weighted_mean(values, weights)
    spread = sum(w**2 * (v - mean) ** 2 for w, v in zip(weights, values, strict=True))
    return math.sqrt(spread * n / (n - 1)) / sum(weights)


def _documents(ids: list[int]) -> list[int]:
    """Each token's document: a run of equal consecutive ids."""
    runs = [0]
    for before, now in zip(ids, ids[1:], strict=False):
        runs.append(runs[-1] + (now != before))
    return runs


def _attention_recount(model: nn.Module, batches: list[Batch]) -> dict[str, Any]:
    """Entropy, shares and uniform entropy per head, by loops over every real query: the keys
    it may see are real (padding), in its document and, in a decoder, not after it."""
    cfg = model.config
    heads = [(layer, head) for layer in range(cfg.num_layers) for head in range(cfg.num_heads)]
    sums = {name: {h: 0.0 for h in heads} for name in ("entropy", "first", "self", "previous")}
    queries, previous_queries, log_keys = 0, 0, 0.0
    for batch in batches:
        with torch.no_grad():
            _, attentions = model(batch["input_ids"], **_inputs(batch), output_attentions=True)
        probs = [a.tolist() for a in attentions]  # L x [B][H][T][T]
        size, length = batch["input_ids"].shape
        for b in range(size):
            real = batch.get("attention_mask", torch.ones(size, length))[b].tolist()
            runs = _documents(batch.get("document_ids", torch.zeros(size, length))[b].tolist())
            for q in range(length):
                if not real[q]:
                    continue
                keys = [
                    k
                    for k in range(length)
                    if real[k] and runs[k] == runs[q] and (not model.causal or k <= q)
                ]
                queries += 1
                previous_queries += int(q > 0)
                log_keys += math.log(len(keys))
                for layer, head in heads:
                    row = probs[layer][b][head][q]
                    sums["entropy"][layer, head] -= sum(p * math.log(p) for p in row if p > 0)
                    sums["first"][layer, head] += row[0]
                    sums["self"][layer, head] += row[q]
                    sums["previous"][layer, head] += row[q - 1] if q > 0 else 0.0

    def per_head(name: str, count: int) -> list[list[float]]:
        return [
            [sums[name][layer, head] / count for head in range(cfg.num_heads)]
            for layer in range(cfg.num_layers)
        ]

    return {
        "entropy_uniform": log_keys / queries,
        "entropy": per_head("entropy", queries),
        "first_share": per_head("first", queries),
        "self_share": per_head("self", queries),
        "previous_share": per_head("previous", previous_queries),
    }


def _importance_recount(model: nn.Module, batches: list[Batch]) -> list[list[float]]:
    """The token-weighted mean over batches of |dL/d gate| at a gate of ones, by autograd."""
    grads = []
    for batch in batches:
        gate = _gate_of_ones(model).requires_grad_(True)
        _loss(model, batch, gate).backward()
        grads.append(gate.grad.abs().tolist())
    weights = [_targets(b) for b in batches]
    cfg = model.config
    return [
        [_weighted_mean([g[layer][head] for g in grads], weights) for head in range(cfg.num_heads)]
        for layer in range(cfg.num_layers)
    ]


def _ablation_recount(model: nn.Module, batches: list[Batch]) -> dict[str, Any]:
    """Base loss, and per head the mean and paired standard error of the per-batch losses with
    the head gated to 0 minus those with every head, token-weighted."""
    cfg = model.config
    weights = [_targets(b) for b in batches]
    with torch.no_grad():
        base = [float(_loss(model, b, _gate_of_ones(model))) for b in batches]
        delta, delta_se = [], []
        for layer in range(cfg.num_layers):
            delta.append([])
            delta_se.append([])
            for head in range(cfg.num_heads):
                gate = _gate_of_ones(model)
                gate[layer, head] = 0.0
                diffs = [
                    float(_loss(model, b, gate)) - x for b, x in zip(batches, base, strict=True)
                ]
                delta[-1].append(_weighted_mean(diffs, weights))
                delta_se[-1].append(_weighted_se(diffs, weights))
    return {
        "base_loss": _weighted_mean(base, weights),
        "delta_loss": delta,
        "delta_loss_se": delta_se,
    }


def _random_ids(generator: torch.Generator, size: int, length: int) -> Tensor:
    return torch.randint(0, VOCAB, (size, length), generator=generator)


def _encoder_with_padding() -> list[Batch]:
    """Three batches of 3 rows (not the 2 layers) with different padding and target counts."""
    generator = torch.Generator().manual_seed(11)
    batches = []
    for real_lengths in ((8, 5, 3), (8, 8, 6), (2, 7, 4)):
        ids = torch.randint(0, VOCAB, (3, 8), generator=generator)
        mask = torch.tensor([[1] * n + [0] * (8 - n) for n in real_lengths])
        labels = _random_ids(generator, 3, 8)
        labels[mask == 0] = IGNORE_INDEX
        labels[:, 1::3] = IGNORE_INDEX
        batches.append({"input_ids": ids, "labels": labels, "attention_mask": mask})
    return batches


def _decoder_plain() -> list[Batch]:
    """Two batches of 3 rows without padding: no mask at all reaches the attention sums."""
    generator = torch.Generator().manual_seed(12)
    return [
        {"input_ids": _random_ids(generator, 3, 7), "labels": _random_ids(generator, 3, 7)}
        for _ in range(2)
    ]


def _decoder_with_documents() -> list[Batch]:
    """Packed documents, an id recurring after another (0, 1, 0: three documents)."""
    generator = torch.Generator().manual_seed(13)
    documents = (
        torch.tensor([[0, 0, 0, 1, 1, 0, 0, 0], [4, 4, 4, 4, 4, 6, 6, 6]]),
        torch.tensor([[2, 3, 3, 3, 3, 3, 5, 5], [1, 1, 1, 1, 1, 1, 1, 1]]),
    )
    return [
        {
            "input_ids": _random_ids(generator, 2, 8),
            "labels": _random_ids(generator, 2, 8),
            "document_ids": d,
        }
        for d in documents
    ]


def _one_pair() -> list[Batch]:
    """One sequence of two tokens: a single query has a token before it."""
    return [{"input_ids": torch.tensor([[3, 9]]), "labels": torch.tensor([[9, 4]])}]


SCENARIOS = {
    "encoder_padding": ("encoder", _encoder_with_padding),
    "decoder": ("decoder", _decoder_plain),
    "decoder_documents": ("decoder", _decoder_with_documents),
    "one_pair": ("decoder", _one_pair),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_head_statistic_equals_a_recount_by_loops(scenario: str) -> None:
    arch, make_batches = SCENARIOS[scenario]
    torch.manual_seed(21)
    model = tiny_model(arch).double()
    batches = make_batches()
    stats = head_stats(model, batches)
    expected = {
        **_ablation_recount(model, batches),
        "importance": _importance_recount(model, batches),
        **_attention_recount(model, batches),
    }
    assert stats.tokens == sum(_targets(b) for b in batches)
    assert stats.batches == len(batches)
    for name, value in expected.items():
        got = getattr(stats, name)
        assert torch.tensor(got).shape == torch.tensor(value).shape, name
        torch.testing.assert_close(
            torch.tensor(got), torch.tensor(value), rtol=1e-7, atol=1e-12, msg=name
        )


def test_head_importance_alone_equals_the_autograd_recount() -> None:
    torch.manual_seed(22)
    model = tiny_model("encoder").double()
    batches = _encoder_with_padding()
    torch.testing.assert_close(
        torch.tensor(head_importance(model, batches)),
        torch.tensor(_importance_recount(model, batches)),
        rtol=1e-7,
        atol=1e-12,
    )


def test_the_stats_dict_holds_every_field() -> None:
    torch.manual_seed(23)
    model = tiny_model("decoder").double()
    stats = head_stats(model, _one_pair())
    record = stats.to_dict()
    assert record == {f.name: getattr(stats, f.name) for f in fields(HeadStats)}
    assert set(HeadStats.PER_HEAD) < set(record)


def test_no_batches_are_refused_with_a_message() -> None:
    with pytest.raises(ValueError) as refused:
        head_stats(tiny_model("decoder"), [])
    assert str(refused.value) == "the head analysis got no batch to score; give it more text"


def test_the_weighted_standard_error_of_three_and_of_one_value() -> None:
    values, weights = [1.0, 2.0, 4.0], [1, 2, 3]
    mean, se = weighted_mean_and_se(torch.tensor(values), torch.tensor(weights))
    assert float(mean) == pytest.approx(_weighted_mean(values, weights))
    assert float(se) == pytest.approx(_weighted_se(values, weights))
    mean, se = weighted_mean_and_se(torch.tensor([3.0]), torch.tensor([5]))
    assert (float(mean), float(se)) == (3.0, 0.0)


def test_the_head_masks_are_in_the_networks_dtype_and_device() -> None:
    model = tiny_model("decoder").double()
    for mask in (all_ones(model), gated_off(model, [Head(1, 2)])):
        assert mask.dtype == torch.float64
    on_meta = tiny_model("decoder").to("meta")
    for mask in (all_ones(on_meta), gated_off(on_meta, [Head(0, 0)])):
        assert mask.device.type == "meta"
    assert gated_off(model, [Head(1, 2)]).tolist() == [[1.0] * 4, [1.0, 1.0, 0.0, 1.0]]


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("inputs", ["none", "padding", "documents"])
def test_the_attention_sums_stay_on_the_attentions_device_and_dtype(
    causal: bool, inputs: str
) -> None:
    """On the meta device, any tensor the sums make on the CPU fails the operation it meets."""
    size, length = 3, 6
    attentions = tuple(torch.empty(size, 4, length, length, device="meta") for _ in range(2))
    batch = {"input_ids": torch.zeros(size, length, dtype=torch.long, device="meta")}
    if inputs == "padding":
        batch["attention_mask"] = torch.ones(size, length, dtype=torch.long, device="meta")
    elif inputs == "documents":
        batch["document_ids"] = torch.zeros(size, length, dtype=torch.long, device="meta")
    sums = attention_sums(attentions, batch, causal=causal)
    for name, value in sums.items():
        assert (value.device.type, value.dtype) == ("meta", torch.float32), name


def test_a_bfloat16_networks_importance_and_attention_sums_are_float32() -> None:
    """In a bfloat16 precision (bf16-true's weights, bf16-mixed's autocast) the attentions are
    bfloat16: they are summed, and the importance averaged, in float32, not rounded to 8 bits
    (the sums of the float32 copy of the same attentions, exactly)."""
    torch.manual_seed(3)
    model = tiny_model("decoder").to(torch.bfloat16)
    batch = _decoder_plain()[0]
    loss, importance, sums = importance_and_attention(model, batch)
    assert (loss.dtype, importance.dtype) == (torch.float32, torch.float32)
    _, attentions = model(batch["input_ids"], output_attentions=True)
    assert attentions[0].dtype == torch.bfloat16
    in_float32 = attention_sums([a.float() for a in attentions], batch, causal=True)
    for name, value in sums.items():
        assert value.dtype == torch.float32, name
        assert torch.equal(value, in_float32[name]), name


def _forward_passes(model: nn.Module) -> list[int]:
    """A counter of the network's forward passes, one item each."""
    calls: list[int] = []
    model.register_forward_hook(lambda *_: calls.append(1))
    return calls


def test_the_prune_curve_has_a_point_per_tenth_and_reuses_the_base_loss() -> None:
    torch.manual_seed(24)
    model = tiny_model("decoder").double()  # 2 layers x 4 heads: 6 may go
    batches = _decoder_plain()
    stats = head_stats(model, batches)
    calls = _forward_passes(model)
    curve = prune_curve(model, batches, stats)
    # Tenths of 8 heads: 0, 0.8, 1.6, 2.4, 3.2, 4, 4.8, 5.6, 6.4, 7.2, 8, rounded, at most 6.
    assert [len(p["removed"]) for p in curve] == [0, 1, 2, 3, 4, 5, 6]
    assert [p["removed_fraction"] for p in curve] == [n / 8 for n in range(7)]
    assert curve[0]["loss"] == stats.base_loss
    assert len(calls) == (len(curve) - 1) * len(batches)  # no pass for nothing removed


def test_a_share_met_up_to_rounding_counts_as_met() -> None:
    # 0.6 is half of 0.6 + 0.5 + 0.1, but in floats that sum is 1.2000000000000002 and its
    # half 0.6000000000000001: the head of 0.6 falls short of the target by a rounding error.
    assert 0.5 * sum([0.6, 0.5, 0.1]) > 0.6
    assert heads_for_share([[0.6, 0.5, 0.1], [0.2, 0.2, 0.6]], 0.5) == [1, 1]


def test_a_layer_without_heads_needs_none() -> None:
    assert heads_for_share([[], [1.0, 3.0]], 0.9) == [0, 2]
