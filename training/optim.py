"""The optimisers of ``optim=adamw`` and ``optim=muon``, each handed to Lightning as one.

``optim=muon`` runs ``torch.optim.Muon`` on the 2-D weight matrices inside the blocks and AdamW
on everything else (embeddings, the tied head, norms, biases: Muon orthogonalises a matrix's
update, which suits hidden layers only). The two are stepped as one optimiser,
``MuonWithAdamW``: Lightning's automatic optimisation takes one, and with it keeps its one
gradient clip over every parameter, gradient accumulation and its step count. (Two optimisers
need manual optimisation, where Lightning neither clips nor accumulates, and counts a
``global_step`` per optimiser step: two per batch.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from conf.schema import OptimConfig


class MuonWithAdamW(torch.optim.Optimizer):
    """Muon and AdamW stepped together as one optimiser.

    Its ``param_groups`` are the two optimisers' own group dicts (Muon's first), so an LR
    scheduler on it scales both and a gradient clip sees every parameter. ``state_dict`` holds
    both states, under "muon" and "adamw".
    """

    def __init__(self, muon: torch.optim.Muon, adamw: torch.optim.AdamW) -> None:
        self.muon = muon
        self.adamw = adamw
        # The groups themselves, not copies (no defaults to fill in): writes reach both.
        super().__init__(muon.param_groups + adamw.param_groups, defaults={})

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = None
        if closure is not None:  # Lightning's closure: forward, backward, gradient clip
            with torch.enable_grad():
                loss = closure()
        self.muon.step()
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
    model: nn.Module, blocks: nn.Module, optim: OptimConfig, *, fused: bool
) -> torch.optim.Optimizer:
    """AdamW over ``model``'s trainable parameters (weight decay on matrices only, never
    biases or norms), or for ``optim.kind == "muon"``, Muon over the 2-D weights of
    ``blocks`` (a submodule of ``model``) with AdamW over the rest. ``fused``: AdamW's one
    fused kernel instead of a loop over tensors (~1 ms a step at small shapes on the CPU)."""
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
    adamw = torch.optim.AdamW(
        [
            {"params": [p for p in rest if p.dim() >= 2], "weight_decay": optim.weight_decay},
            {"params": [p for p in rest if p.dim() < 2], "weight_decay": 0.0},
        ],
        lr=optim.lr,
        betas=(optim.beta1, optim.beta2),
        fused=fused,
    )
    if not muon_ids:
        return adamw
    muon = torch.optim.Muon(
        [p for p in params if id(p) in muon_ids],
        lr=optim.muon_lr,
        momentum=optim.muon_momentum,
        weight_decay=optim.muon_weight_decay,
    )
    return MuonWithAdamW(muon, adamw)
