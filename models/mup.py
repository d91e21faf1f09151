"""μP's multipliers folded into the weights: a ``model.parametrization=mup`` network as the
standard-parametrized network that computes the same logits, for the tools that know only the
standard one (the Hugging Face export).

What μP changes (``ModelConfig.width_multiplier`` m, ``models/transformer.py``): the hidden
matrices' init std and Adam learning rate divided by sqrt(m) and m, the attention scores
scaled by sqrt(D_base) / D instead of 1 / sqrt(D), and the readout's input divided by m
(each with its tunable constant, ``ModelConfig.mup_*_multiplier``). The
init and the learning rates are training's business; the two multipliers of the forward pass
are linear, so each folds into the weights before it:

- the attention factor s into the query rows of ``qkv_proj`` (weight and bias): scaling q by
  s sqrt(D) turns q k / sqrt(D) into q k s, rotary positions included, since a rotation is
  linear;
- the readout's multiplier (``mup_output_multiplier`` / m) into the affine LayerNorm just
  before the readout (the final norm of a pre-LN decoder, the last block's MLP norm of a
  post-LN one, the MLM head's norm): its gain and bias multiplied by it, which works with tied
  embeddings too, where the readout's weight is also the input table and cannot change.
"""

from __future__ import annotations

import dataclasses
import math

from torch import Tensor

from models.config import ModelConfig


def readout_norm_prefix(cfg: ModelConfig) -> str:
    """The state-dict prefix of the LayerNorm whose output the readout reads."""
    if cfg.arch == "encoder":
        return "mlm_head.norm"
    return "final_norm" if cfg.norm == "pre" else f"blocks.{cfg.num_layers - 1}.mlp_norm"


def fold_into_standard(
    cfg: ModelConfig, state: dict[str, Tensor]
) -> tuple[ModelConfig, dict[str, Tensor]]:
    """The standard-parametrization config and state dict whose network computes the logits
    of ``cfg``'s with ``state`` (new tensors; ``state`` is left as it is)."""
    standard = dataclasses.replace(cfg, parametrization="standard")
    folded = dict(state)
    if cfg.attention_scale is not None:
        query = cfg.attention_scale * math.sqrt(cfg.hidden_size // cfg.num_heads)
        for i in range(cfg.num_layers):
            for kind in ("weight", "bias"):
                key = f"blocks.{i}.attn.qkv_proj.{kind}"
                if key in folded:  # qkv_bias=false has none
                    rows = folded[key].clone()
                    rows[: cfg.hidden_size] *= query  # the query rows
                    folded[key] = rows
    if cfg.readout_multiplier != 1.0:
        norm = readout_norm_prefix(cfg)
        for kind in ("weight", "bias"):
            folded[f"{norm}.{kind}"] = state[f"{norm}.{kind}"] * cfg.readout_multiplier
    return standard, folded
