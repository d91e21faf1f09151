"""What each attention head does, on a network in eval mode and its batches, with the head gate
of ``models.attention`` (``head_mask`` [L, H]):

- ``delta_loss``: the loss with one head gated off minus the loss with every head; its standard
  error is that of the token-weighted mean of the per-batch differences (paired).
- ``importance``: Michel, Levy and Neubig (2019), the mean |dL/d gate_h| at a gate of ones.
- ``entropy``: the mean over queries of each head's attention entropy (nats); a uniform head has
  ``entropy_uniform``, the mean of log(keys).
- ``previous``/``first``/``self_share``: the mean attention a query gives the token before it,
  the first token and itself.
- the prune curve: heads gated off least important first, a layer never emptied.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from data.collate import IGNORE_INDEX
from models.attention import build_attention_mask
from models.positions import document_layout
from training.task import mean_token_loss, network_inputs

# The prune curve's points: each tenth of the heads removed.
PRUNE_STEPS = 10


@dataclass(frozen=True)
class Head:
    """One attention head, both indices from 0; written ``layer:head``."""

    layer: int
    head: int

    def __str__(self) -> str:
        return f"{self.layer}:{self.head}"


@dataclass(frozen=True)
class HeadStats:
    """Per-head statistics of one network over some batches; each of ``PER_HEAD`` [L][H]."""

    PER_HEAD: ClassVar[tuple[str, ...]] = (
        "delta_loss",
        "delta_loss_se",
        "importance",
        "entropy",
        "previous_share",
        "first_share",
        "self_share",
    )

    base_loss: float
    tokens: int  # the targets scored
    batches: int
    entropy_uniform: float  # nats: the mean log(keys) of the queries scored
    delta_loss: list[list[float]]
    delta_loss_se: list[list[float]]
    importance: list[list[float]]
    entropy: list[list[float]]
    previous_share: list[list[float]]
    first_share: list[list[float]]
    self_share: list[list[float]]

    def rows(self) -> list[dict[str, Any]]:
        """One row per head, layer-major."""
        return [
            {
                "layer": layer,
                "head": head,
                **{f: getattr(self, f)[layer][head] for f in self.PER_HEAD},
            }
            for layer in range(len(self.importance))
            for head in range(len(self.importance[layer]))
        ]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def all_ones(model: nn.Module) -> Tensor:
    """The head mask that keeps every head, [L, H], in the network's dtype and device."""
    cfg = model.config
    weight = next(model.parameters())
    return torch.ones(cfg.num_layers, cfg.num_heads, dtype=weight.dtype, device=weight.device)


def gated_off(model: nn.Module, heads: Sequence[Head]) -> Tensor:
    """The head mask [L, H] with ``heads`` at 0 and every other head at 1."""
    mask = all_ones(model)
    for h in heads:
        mask[h.layer, h.head] = 0.0
    return mask


def batch_loss(model: nn.Module, batch: dict[str, Tensor], head_mask: Tensor | None) -> Tensor:
    """The batch's mean loss over its targets, under ``head_mask``."""
    logits = model(batch["input_ids"], **network_inputs(batch), head_mask=head_mask)
    return mean_token_loss(logits, batch["labels"])


def targets_of(batch: dict[str, Tensor]) -> int:
    """How many targets the batch scores."""
    return int((batch["labels"] != IGNORE_INDEX).sum())


def importance_and_attention(
    model: nn.Module, batch: dict[str, Tensor]
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """One forward and backward pass at a gate of ones: the batch's loss, |dL/d gate| [L, H]
    and its attention sums (``attention_sums``')."""
    gate = all_ones(model).requires_grad_(True)
    logits, attentions = model(
        batch["input_ids"], **network_inputs(batch), head_mask=gate, output_attentions=True
    )
    loss = mean_token_loss(logits, batch["labels"])
    (grad,) = torch.autograd.grad(loss, gate)
    with torch.no_grad():
        sums = attention_sums(attentions, batch, causal=model.causal)
    # Averaged over batches in float32 at least, as the loss is, whatever the weights' dtype.
    return loss.detach(), grad.abs().to(at_least_float32(grad.dtype)), sums


def head_importance(model: nn.Module, batches: Sequence[dict[str, Tensor]]) -> list[list[float]]:
    """Each head's importance over ``batches``: the token-weighted mean of |dL/d gate| [L][H]."""
    grads = torch.stack([importance_and_attention(model, b)[1] for b in batches])
    weights = torch.tensor([targets_of(b) for b in batches])
    return weighted_mean_and_se(grads, weights)[0].tolist()


def attention_sums(
    attentions: Sequence[Tensor], batch: dict[str, Tensor], *, causal: bool
) -> dict[str, Tensor]:
    """Sums over a batch's real queries of each layer's and head's entropy and attention shares
    ([L, H] each), with the counts they are divided by and the sum of log(keys)."""
    # Summed in float32 at least: bfloat16 probabilities (bf16-mixed, bf16-true) would round
    # the sums over queries to 8 bits.
    probs = torch.stack(attentions, dim=1)  # (B, L, H, T, T)
    probs = probs.to(at_least_float32(probs.dtype))
    batch_size, _, _, length, _ = probs.shape
    padding = batch.get("attention_mask")
    document_ids = batch.get("document_ids")
    allowed, _ = build_attention_mask(
        batch_size=batch_size,
        num_heads=1,
        q_len=length,
        k_len=length,
        attention_mask=padding,
        mask=None if document_ids is None else document_layout(document_ids)[0],
        device=probs.device,
    )
    if allowed is None:
        allowed = torch.ones(1, 1, length, length, dtype=torch.bool, device=probs.device)
    if causal:
        allowed = allowed & torch.ones(length, length, dtype=torch.bool, device=probs.device).tril()
    allowed = allowed.expand(batch_size, 1, length, length)[:, 0]  # (B, T, T)
    real = (
        torch.ones(batch_size, length, dtype=torch.bool, device=probs.device)
        if padding is None
        else padding.bool()
    )  # (B, T): the queries scored
    keys = allowed.sum(-1)  # (B, T)
    real = real & (keys > 0)
    weight = real.to(probs.dtype)[:, None, None]  # (B, 1, 1, T)
    has_previous = weight[..., 1:]  # (B, 1, 1, T - 1)
    entropy = torch.special.entr(probs).sum(-1)  # (B, L, H, T)
    previous = probs.diagonal(offset=-1, dim1=-2, dim2=-1)  # (B, L, H, T - 1)
    own = probs.diagonal(dim1=-2, dim2=-1)  # (B, L, H, T)
    return {
        "entropy": (entropy * weight).sum((0, 3)),
        "first": (probs[..., 0] * weight).sum((0, 3)),
        "self": (own * weight).sum((0, 3)),
        "previous": (previous * has_previous).sum((0, 3)),
        "queries": weight.sum(),
        "previous_queries": has_previous.sum(),
        "log_keys": (keys.clamp(min=1).to(probs.dtype).log() * real).sum(),
    }


def at_least_float32(dtype: torch.dtype) -> torch.dtype:
    """float32 for a half-precision dtype, the dtype itself for float32 and float64."""
    return torch.promote_types(dtype, torch.float32)


def weighted_mean_and_se(values: Tensor, weights: Tensor) -> tuple[Tensor, Tensor]:
    """The weighted mean over the first dimension of ``values`` [N, ...] (weights [N]) and its
    standard error (the ratio estimator's: sqrt(n / (n - 1) sum w^2 (x - mean)^2) / sum w);
    0 with one batch."""
    w = weights.to(values.dtype).reshape(-1, *([1] * (values.dim() - 1)))
    total = w.sum()
    mean = (w * values).sum(0) / total
    n = values.shape[0]
    if n < 2:
        return mean, torch.zeros_like(mean)
    spread = (w**2 * (values - mean) ** 2).sum(0) * n / (n - 1)
    return mean, spread.sqrt() / total


def running_mean(values: Tensor, weights: Tensor) -> Tensor:
    """The weighted mean of ``values`` [N] (weights [N]) summed one batch at a time, in order,
    as mode=eval's loss metric (torchmetrics' ``MeanMetric``) sums it: the same roundings, so
    the same loss to the bit from the same per-batch losses (``torch.sum`` adds in another
    order, a few ulps away)."""
    total = torch.zeros((), dtype=values.dtype, device=values.device)
    weight = torch.zeros_like(total)
    for value, count in zip(values, weights.to(total), strict=True):
        total += value * count
        weight += count
    return total / weight


@torch.no_grad()
def mean_loss(model: nn.Module, batches: Sequence[dict[str, Tensor]], head_mask: Tensor) -> float:
    """The token-weighted loss over ``batches`` under ``head_mask``, summed as mode=eval sums
    its loss: a point of the prune curve is mode=eval's loss with those heads gated off."""
    losses = torch.stack([batch_loss(model, b, head_mask) for b in batches])
    return float(running_mean(losses, torch.tensor([targets_of(b) for b in batches])))


def head_stats(model: nn.Module, batches: Sequence[dict[str, Tensor]]) -> HeadStats:
    """Ablation, importance, entropy and shares of every head over ``batches`` (one forward
    and backward pass per batch, then one forward pass for the base loss and one per head and
    batch). Run in the precision's context (``precision.EvalPrecision.step``)."""
    if not batches:
        raise ValueError("the head analysis got no batch to score; give it more text")
    cfg = model.config
    heads = [Head(layer, head) for layer in range(cfg.num_layers) for head in range(cfg.num_heads)]
    base, grads, ablated, totals = [], [], [], {}
    for batch in batches:
        _, grad, sums = importance_and_attention(model, batch)
        grads.append(grad)
        for key, value in sums.items():
            totals[key] = totals.get(key, 0) + value
        with torch.no_grad():
            # mode=eval's forward pass (no gate, no attention returned: the same kernels), so
            # that base_loss is its loss; a gate of ones would multiply exactly by 1.
            base.append(batch_loss(model, batch, None))
            ablated.append(
                torch.stack([batch_loss(model, batch, gated_off(model, [h])) for h in heads])
            )
    weights = torch.tensor([targets_of(b) for b in batches])
    base_losses = torch.stack(base)  # (N,)
    per_head = torch.stack(ablated).view(len(batches), cfg.num_layers, cfg.num_heads)
    base_loss = running_mean(base_losses, weights)
    delta, delta_se = weighted_mean_and_se(per_head - base_losses[:, None, None], weights)
    importance, _ = weighted_mean_and_se(torch.stack(grads), weights)
    queries = totals["queries"]
    return HeadStats(
        base_loss=float(base_loss),
        tokens=int(weights.sum()),
        batches=len(batches),
        entropy_uniform=float(totals["log_keys"] / queries),
        delta_loss=delta.tolist(),
        delta_loss_se=delta_se.tolist(),
        importance=importance.tolist(),
        entropy=(totals["entropy"] / queries).tolist(),
        previous_share=(totals["previous"] / totals["previous_queries"].clamp(min=1)).tolist(),
        first_share=(totals["first"] / queries).tolist(),
        self_share=(totals["self"] / queries).tolist(),
    )


def prune_order(importance: Sequence[Sequence[float]]) -> list[Head]:
    """Every head that can go, least important first (ties by layer, then head), skipping the
    last head of each layer: L x (H - 1) heads."""
    ranked = sorted(
        (Head(layer, head) for layer, row in enumerate(importance) for head in range(len(row))),
        key=lambda h: (importance[h.layer][h.head], h.layer, h.head),
    )
    left = [len(row) for row in importance]
    order = []
    for h in ranked:
        if left[h.layer] > 1:
            left[h.layer] -= 1
            order.append(h)
    return order


def heads_to_prune(importance: Sequence[Sequence[float]], fraction: float) -> list[Head]:
    """The least important ``fraction`` of all heads (rounded), never a layer's last head."""
    total = sum(len(row) for row in importance)
    order = prune_order(importance)
    return order[: min(round(fraction * total), len(order))]


def prune_curve(
    model: nn.Module, batches: Sequence[dict[str, Tensor]], stats: HeadStats
) -> list[dict[str, Any]]:
    """The loss with the least important heads gated off, at each tenth of the heads removed
    (counts rounded, each once), ending with one head left per layer; the first point is
    ``stats.base_loss``, nothing removed."""
    total = sum(len(row) for row in stats.importance)
    order = prune_order(stats.importance)
    counts = sorted({min(round(total * i / PRUNE_STEPS), len(order)) for i in range(11)})
    curve = []
    for count in counts:
        removed = order[:count]
        loss = (
            stats.base_loss if count == 0 else mean_loss(model, batches, gated_off(model, removed))
        )
        curve.append(
            {"removed_fraction": count / total, "removed": [str(h) for h in removed], "loss": loss}
        )
    return curve


def heads_for_share(importance: Sequence[Sequence[float]], share: float) -> list[int]:
    """Per layer, the fewest heads whose importance sums to at least ``share`` of the layer's."""
    counts = []
    for row in importance:
        ranked = sorted(row, reverse=True)
        target = share * sum(ranked)
        running, count = 0.0, 0
        for count, value in enumerate(ranked, start=1):  # noqa: B007 (the count is the result)
            running += value
            if running >= target * (1 - 1e-12):
                break
        counts.append(count)
    return counts


def parse_heads(spec: Sequence[str], num_layers: int, num_heads: int) -> list[Head]:
    """``["0:1", "1:3"]`` (``heads.prune``'s names, ``HeadsConfig`` checked their form) ->
    heads, each checked against the network's layers and heads."""
    heads = []
    for item in spec:
        layer, head = item.split(":")
        h = Head(int(layer), int(head))
        if h.layer >= num_layers or h.head >= num_heads:
            raise ValueError(
                f"heads.prune names head {h}, outside the checkpoint's layers 0-"
                f"{num_layers - 1} and heads 0-{num_heads - 1} (LAYER:HEAD, both from 0)"
            )
        heads.append(h)
    return list(dict.fromkeys(heads))
