"""Tiny model configs shared by the model tests and the task, output and oracle tests."""

from __future__ import annotations

from typing import Any

import pytest

from models.config import ModelConfig
from models.transformer import Decoder, Encoder, build_model

VOCAB = 37


def tiny_config(arch: str = "decoder", **overrides: Any) -> ModelConfig:
    fields: dict[str, Any] = dict(
        vocab_size=VOCAB,
        arch=arch,
        max_seq_len=16,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        dropout=0.0,
        norm="pre" if arch == "decoder" else "post",
    )
    return ModelConfig(**(fields | overrides))


def tiny_model(arch: str = "decoder", **overrides: Any) -> Encoder | Decoder:
    return build_model(tiny_config(arch, **overrides)).eval()


# The position, key/value-head, parametrization and speed-run options that change the
# attention: every cache, padding and generation test runs with each.
VARIANTS = [
    pytest.param({}, id="learned"),
    pytest.param({"position": "rope"}, id="rope"),
    pytest.param({"position": "rope", "num_kv_heads": 2}, id="rope_gqa"),
    pytest.param({"num_kv_heads": 1}, id="mqa"),
    # μP: the scores' own scale in SDPA (cached or not) and the readout multiplier; the
    # queries start non-zero, so that the attention is not uniform
    pytest.param(
        {"parametrization": "mup", "mup_base_width": 12, "mup_zero_init": False}, id="mup"
    ),
    # the speed-run options: queries and keys normalised before the rotation and the cache,
    # ReLU², capped logits
    pytest.param(
        {"position": "rope", "qk_norm": True, "activation": "relu2", "logit_softcap": 5.0},
        id="qk_norm",
    ),
    # U-net skips and value embeddings: the cache holds the values the embeddings added to
    pytest.param(
        {"position": "rope", "num_layers": 4, "unet_skips": True, "value_embeddings": 2},
        id="unet_value_embeddings",
    ),
]
