"""ModelConfig: validation with errors that say how to fix, dict round trips, resolved sizes.

Tiny CPU models (``tests/tiny_models.py``), seeded, a few seconds."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from models.config import ModelConfig
from models.transformer import Encoder, build_model
from tests.tiny_models import VOCAB, tiny_config


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (
            {"hidden_size": 100, "num_heads": 8},
            "hidden_size=100 is not divisible by num_heads=8; valid head counts for 100: "
            "1, 2, 4, 5, 10, 20, 25, 50, 100",
        ),
        ({"dropout": 1.0}, r"dropout=1.0 is outside \[0, 1\)"),
        ({"dropout": -0.1}, r"dropout=-0.1 is outside \[0, 1\)"),
        ({"attn_dropout": 1.5}, r"attn_dropout=1.5 is outside \[0, 1\)"),
        ({"resid_dropout": -1.0}, r"resid_dropout=-1.0 is outside"),
        ({"embd_dropout": 2.0}, r"embd_dropout=2.0 is outside"),
        ({"arch": "gpt"}, "arch='gpt' is unknown; choose one of: encoder, decoder"),
        ({"norm": "sandwich"}, "norm='sandwich' is unknown; choose one of: pre, post"),
        (
            {"position": "alibi"},
            "position='alibi' is unknown; choose one of: learned, sinusoidal, rope",
        ),
        ({"vocab_size": 0}, "vocab_size=0 must be a positive integer"),
        ({"pad_token_id": -1}, "pad_token_id=-1 is outside the vocabulary"),
        ({"layer_norm_eps": None}, "layer_norm_eps is None; expected float"),
        ({"max_seq_len": -4}, "max_seq_len=-4 must be a positive integer"),
        ({"hidden_size": 0}, "hidden_size=0 must be a positive integer"),
        ({"num_layers": 0}, "num_layers=0 must be a positive integer"),
        ({"num_heads": 0}, "num_heads=0 must be a positive integer"),
        ({"intermediate_size": 0}, "intermediate_size=0 must be a positive integer"),
        ({"type_vocab_size": -1}, "type_vocab_size=-1 must be >= 0"),
        ({"type_vocab_size": 2}, "type_vocab_size=2 is for the encoder"),
        ({"layer_norm_eps": 0.0}, "layer_norm_eps=0.0 must be > 0"),
        ({"pad_token_id": VOCAB}, rf"pad_token_id={VOCAB} is outside the vocabulary"),
        ({"num_layers": 2.5}, "num_layers=2.5 has type float; expected int"),
        ({"num_layers": True}, "num_layers=True has type bool; expected int"),
        ({"qkv_bias": "yes"}, "qkv_bias='yes' has type str; expected bool"),
        (
            {"num_kv_heads": 3},
            r"num_kv_heads=3 does not divide num_heads=4; use one of 1, 2, 4 \(1 = multi-query",
        ),
        ({"num_kv_heads": 0}, "num_kv_heads=0 does not divide num_heads=4"),
        (
            {"position": "rope", "hidden_size": 36, "num_heads": 4},
            "position=rope needs an even head dimension, but hidden_size / num_heads = 9",
        ),
    ],
)
def test_config_errors_say_how_to_fix(overrides: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        tiny_config(**overrides)


def test_from_dict_rejects_unknown_and_missing_keys() -> None:
    good = tiny_config().to_dict()
    with pytest.raises(
        ValueError,
        match=r"model.hiden_size \(did you mean model.hidden_size\?\); "
        r"valid keys: vocab_size, arch",
    ):
        ModelConfig.from_dict(good | {"hiden_size": 64})
    with pytest.raises(ValueError, match="model.banana; valid keys"):
        ModelConfig.from_dict(good | {"banana": 1})
    del good["vocab_size"]
    with pytest.raises(ValueError, match="missing key.*model.vocab_size"):
        ModelConfig.from_dict(good)


def test_config_round_trips_through_weights_only_checkpoint(tmp_path: Any) -> None:
    cfg = tiny_config(dropout=0, position="sinusoidal")  # an int dropout becomes a float
    assert cfg.dropout == 0.0 and isinstance(cfg.dropout, float)
    model = build_model(cfg).eval()
    torch.save({"config": cfg.to_dict(), "state_dict": model.state_dict()}, tmp_path / "m.pt")
    saved = torch.load(tmp_path / "m.pt", weights_only=True)
    restored = build_model(ModelConfig.from_dict(saved["config"])).eval()
    restored.load_state_dict(saved["state_dict"])
    assert restored.config == cfg
    assert not any("sinusoid" in key for key in saved["state_dict"])  # derived, not stored
    ids = torch.randint(0, VOCAB, (2, 9))
    torch.testing.assert_close(restored(ids), model(ids), rtol=0, atol=0)


def test_resolved_dropouts() -> None:
    cfg = tiny_config(dropout=0.1, attn_dropout=0.0, embd_dropout=0.3)
    assert (cfg.attn_dropout_p, cfg.resid_dropout_p, cfg.embd_dropout_p) == (0.0, 0.1, 0.3)
    assert cfg.mlp_size == 4 * cfg.hidden_size
    assert tiny_config(intermediate_size=48).mlp_size == 48


def test_vocab_size_may_wait_for_the_tokenizer() -> None:
    cfg = tiny_config(vocab_size=None, pad_token_id=3)  # a YAML config validated early
    with pytest.raises(ValueError, match="vocab_size is None; fill it in from the tokenizer"):
        build_model(cfg)
    build_model(ModelConfig.from_dict(cfg.to_dict() | {"vocab_size": VOCAB}))


def test_model_class_must_match_arch() -> None:
    with pytest.raises(ValueError, match="Encoder needs arch='encoder'.*build_model"):
        Encoder(tiny_config("decoder"))
