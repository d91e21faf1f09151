"""The optimisers of ``optim=adamw`` and ``optim=muon``, each handed to Lightning as one.

``optim=muon`` runs Muon on the 2-D weight matrices inside the blocks (it orthogonalises a
matrix's update, which suits hidden layers only) and AdamW on everything else, stepped as one
optimiser: with two, Lightning needs manual optimisation, where it neither clips nor
accumulates gradients and counts two ``global_step`` per batch.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from common.library_private import let_grad_scaler_unscale
from conf.schema import OptimConfig


class BatchedMuon(torch.optim.Muon):
    """``torch.optim.Muon``'s update, orthogonalising every group of same-shaped matrices in
    one batched pass: torch's runs 15 small matmuls per matrix, this 15 per shape (a block's few
    shapes, each over the L layers), which use the CPU better. The state and hyper-parameters
    are torch's, so checkpoints are interchangeable (tests/training/test_tasks.py compares the
    two). It implements torch's default ``adjust_lr_fn`` only, which ``build_optimizer`` uses."""

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            momentum = group["momentum"]
            by_shape: dict[tuple[int, int], list[tuple[Tensor, Tensor, bool]]] = defaultdict(list)
            for p in params:
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p.grad)
                buf = state["momentum_buffer"]
                buf.lerp_(p.grad, 1 - momentum)
                update = p.grad.lerp(buf, momentum) if group["nesterov"] else buf
                tall = p.shape[0] > p.shape[1]  # iterate on the wide orientation, as torch does
                update = update.mT if tall else update
                by_shape[tuple(update.shape)].append((p, update, tall))
            for members in by_shape.values():
                ortho = _newton_schulz(
                    torch.stack([update for _, update, _ in members]),  # (N, rows, cols)
                    group["ns_coefficients"],
                    group["ns_steps"],
                    group["eps"],
                )
                for (p, _, tall), o in zip(members, ortho, strict=True):
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                    scale = math.sqrt(max(1.0, p.shape[0] / p.shape[1]))
                    p.add_(o.mT if tall else o, alpha=-group["lr"] * scale)
        return loss


def _newton_schulz(
    updates: Tensor, coefficients: tuple[float, float, float], steps: int, eps: float
) -> Tensor:
    """Approximately orthogonalise each matrix of ``updates`` [N, rows <= cols]: torch.optim.
    Muon's quintic iteration in bfloat16, batched over N."""
    a, b, c = coefficients
    x = updates.bfloat16()  # (N, r, c)
    # Frobenius norm per matrix: the spectral norm is then at most 1.
    x = x / x.norm(dim=(-2, -1), keepdim=True).clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.mT  # (N, r, r)
        poly = torch.baddbmm(gram, gram, gram, beta=b, alpha=c)  # (N, r, r)
        x = torch.baddbmm(x, poly, x, beta=a)  # (N, r, c)
    return x


class MuonWithAdamW(torch.optim.Optimizer):
    """Muon and AdamW stepped together as one optimiser, whose ``param_groups`` are theirs
    (Muon's first): an LR scheduler scales both, a gradient clip sees every parameter."""

    def __init__(self, muon: BatchedMuon, adamw: torch.optim.AdamW) -> None:
        self.muon = muon
        self.adamw = adamw
        # The groups themselves, not copies (no defaults to fill in): writes reach both.
        super().__init__(muon.param_groups + adamw.param_groups, defaults={})

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = self.muon.step(closure)  # Lightning's closure (forward, backward, clip) first
        self.adamw.step()
        return loss

    def state_dict(self) -> dict[str, Any]:
        return {"muon": self.muon.state_dict(), "adamw": self.adamw.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.muon.load_state_dict(state_dict["muon"])
        self.adamw.load_state_dict(state_dict["adamw"])
        # Loading replaces the optimisers' group dicts; the list is updated in place because
        # Lightning's wrapper and the LR scheduler hold this very list.
        self.param_groups[:] = self.muon.param_groups + self.adamw.param_groups


def build_optimizer(
    model: nn.Module,
    blocks: nn.Module,
    optim: OptimConfig,
    *,
    fused: bool,
    hidden_matrices: Sequence[nn.Parameter] = (),
    width_multiplier: float = 1.0,
) -> torch.optim.Optimizer:
    """AdamW over ``model``'s trainable parameters (weight decay on matrices only), or under
    optim=muon, Muon over the 2-D weights of ``blocks`` with AdamW over the rest. ``fused``:
    AdamW's one fused kernel (~1 ms a step faster at small shapes on the CPU).

    μP (``width_multiplier`` m != 1): AdamW's learning rate of the ``hidden_matrices`` it
    steps is divided by m, in a group of their own after the others. Muon's is not: its
    orthogonalised update already has the spectral norm μP asks of a hidden matrix, lr times
    sqrt(max(1, fan_out / fan_in)), the same at every width (docs/training.md, "μP")."""
    params = [p for p in model.parameters() if p.requires_grad]
    muon_ids: set[int] = set()
    if optim.kind == "muon":
        muon_ids = {id(p) for p in blocks.parameters() if p.requires_grad and p.dim() == 2}
        if not muon_ids:
            raise ValueError(
                "optim=muon found no trainable 2-D weight matrix inside the blocks to give "
                "Muon; use optim=adamw"
            )
    rest = [p for p in params if id(p) not in muon_ids]
    scaled = set()
    if width_multiplier != 1.0:
        scaled = {id(p) for p in hidden_matrices} & {id(p) for p in rest}
    groups = [
        {
            "params": [p for p in rest if p.dim() >= 2 and id(p) not in scaled],
            "weight_decay": optim.weight_decay,
        },
        {"params": [p for p in rest if p.dim() < 2], "weight_decay": 0.0},
    ]
    if scaled:
        groups.append(
            {
                "params": [p for p in rest if id(p) in scaled],
                "weight_decay": optim.weight_decay,
                "lr": optim.lr / width_multiplier,
            }
        )
    adamw = torch.optim.AdamW(
        groups,
        lr=optim.lr,
        betas=(optim.beta1, optim.beta2),
        fused=fused,
    )
    # A fused AdamW tells a GradScaler that its step unscales the gradients itself, so Lightning
    # refuses to clip them under fp16; told otherwise, the scaler unscales before the clip.
    let_grad_scaler_unscale(adamw)
    if not muon_ids:
        return adamw
    muon = BatchedMuon(
        [p for p in params if id(p) in muon_ids],
        lr=optim.muon_lr,
        momentum=optim.muon_momentum,
        weight_decay=optim.muon_weight_decay,
    )
    return MuonWithAdamW(muon, adamw)
