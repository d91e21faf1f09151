"""Configuration of the tinylm Transformers (one flat dataclass that validates itself, plain
values so that checkpoints load with ``weights_only=True``), and the checks every config
group shares: field types, unknown keys with a did-you-mean, missing keys.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

ARCHS = ("encoder", "decoder")
FIELD_TYPES = {"int": int, "float": float, "str": str, "bool": bool}


def check_field_types(config: Any, prefix: str = "") -> None:
    """Reject values of the wrong type, naming the key, for dataclass fields annotated int /
    float / str / bool (optionally ``| None``) or Any. Floats given as ints (``dropout: 0``)
    become floats so ``asdict`` stays stable; bool, an int subclass, is no int here."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        expected = field.type.replace(" | None", "")
        if expected == "Any":
            continue
        if value is None:
            if "None" in field.type:
                continue
            raise ValueError(f"{prefix}{field.name} is None; expected {expected}")
        kind = FIELD_TYPES[expected]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            setattr(config, field.name, float(value))
        elif not isinstance(value, kind) or isinstance(value, bool) != (kind is bool):
            raise ValueError(
                f"{prefix}{field.name}={value!r} has type {type(value).__name__}; "
                f"expected {expected}"
            )


def closest(name: str, valid: Sequence[str]) -> str | None:
    """The entry of ``valid`` a mistyped ``name`` most likely meant, or None: the one
    did-you-mean of every key and choice check."""
    close = difflib.get_close_matches(name, valid, n=1)
    return close[0] if close else None


def check_names(
    keys: Iterable[str],
    valid: Sequence[str],
    prefix: str,
    retired: Mapping[str, str] | None = None,
) -> None:
    """Reject the ``keys`` that are not in ``valid``, each with the closest valid one; a key
    in ``retired`` (old name -> what replaced it) is named with its replacement instead."""
    unknown = [str(k) for k in keys if k not in valid]
    if not unknown:
        return
    retired = retired or {}
    hints = []
    for key in unknown:
        hint = closest(key, valid)
        if key in retired:
            hints.append(f"{prefix}{key} (retired: use {retired[key]})")
        else:
            hints.append(f"{prefix}{key}" + (f" (did you mean {prefix}{hint}?)" if hint else ""))
    raise ValueError(f"unknown key(s) {', '.join(hints)}; valid keys: {', '.join(valid)}")


def check_head_count(width_name: str, width: int, num_heads: int) -> None:
    """``width`` must split evenly into ``num_heads`` heads; the message lists the counts that
    would."""
    if num_heads > 0 and width > 0 and width % num_heads == 0:
        return
    divisors = [h for h in range(1, width + 1) if width % h == 0]
    raise ValueError(
        f"{width_name}={width} is not divisible by num_heads={num_heads}; valid head counts "
        f"for {width}: {', '.join(map(str, divisors))}"
    )


def check_kv_heads(num_heads: int, num_kv_heads: int) -> None:
    """Each key/value head serves num_heads / num_kv_heads query heads."""
    if num_kv_heads > 0 and num_heads % num_kv_heads == 0:
        return
    divisors = [h for h in range(1, num_heads + 1) if num_heads % h == 0]
    raise ValueError(
        f"num_kv_heads={num_kv_heads} does not divide num_heads={num_heads}; use one of "
        f"{', '.join(map(str, divisors))} (1 = multi-query, {num_heads} = multi-head), or null"
    )


def check_rotary_dim(head_dim: int) -> None:
    """RoPE rotates pairs of head dimensions, so the head width must be even."""
    if head_dim % 2:
        raise ValueError(
            f"position=rope needs an even head dimension, but hidden_size / num_heads = "
            f"{head_dim}; change hidden_size or num_heads, or use position=learned"
        )


def check_dropout(name: str, value: float) -> None:
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name}={value} is outside [0, 1); use e.g. 0.0 or 0.1")


def from_mapping(cls: type[T], values: dict[str, Any], prefix: str) -> T:
    """``cls(**values)`` for a config dataclass, naming unknown keys (with a did-you-mean) and
    missing ones first: the one way every config group is read."""
    check_names(values, [f.name for f in dataclasses.fields(cls)], prefix)
    missing = [
        f"{prefix}{f.name}"
        for f in dataclasses.fields(cls)
        if f.name not in values
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ValueError(f"missing key(s) {', '.join(missing)}; add them to the config")
    return cls(**values)


NORMS = ("pre", "post")
POSITIONS = ("learned", "sinusoidal", "rope")
PARAMETRIZATIONS = ("standard", "mup")
ACTIVATIONS = ("gelu", "relu2")


@dataclass
class ModelConfig:
    """Hyperparameters of an ``Encoder`` (BERT-style) or ``Decoder`` (GPT-style); the keys
    are described in ``conf/model/*.yaml``.

    vocab_size: required, but None is accepted so that a YAML config (where the tokenizer fills
        it in) validates early; building a model needs the number.
    num_kv_heads: None means num_heads (and reads the checkpoints of versions before it).
    parametrization: ``mup`` scales initialisation, learning rates, attention and the readout
        with ``hidden_size / mup_base_width`` (``models/mup.py``); at the base width it is the
        standard parametrization, zero initialisations and multipliers aside.
    mup_output_multiplier, mup_attention_multiplier: μP's two constants, tuned at the base
        width like a learning rate (mup's ``output_mult`` and ``attn_mult``); read under
        ``parametrization=mup`` only, so that one sweep may set them for both.
    qk_norm ... value_embeddings: the options of modded-nanogpt's speed runs
        (docs/benchmarks.md, "A faster recipe" measures what each pays here): RMS-normalised
        queries and keys per head, ReLU² in the MLP, the residual branches' output projections
        initialised to zero, logits soft-capped as cap * tanh(z / cap), U-net skips (the
        output of layer i, weighted, added to the input of layer L - 1 - i, i < L // 2), and
        value-embedding tables (table i adds to the values of layers i and L - n + i).
    """

    vocab_size: int | None
    arch: str = "decoder"
    max_seq_len: int = 128
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int | None = None
    intermediate_size: int | None = None
    dropout: float = 0.1
    attn_dropout: float | None = None
    resid_dropout: float | None = None
    embd_dropout: float | None = None
    norm: str = "pre"
    position: str = "learned"
    qkv_bias: bool = True
    tie_embeddings: bool = True
    type_vocab_size: int = 0
    layer_norm_eps: float = 1e-5
    pad_token_id: int | None = None
    parametrization: str = "standard"
    mup_base_width: int = 128
    mup_zero_init: bool = True
    mup_output_multiplier: float = 1.0
    mup_attention_multiplier: float = 1.0
    qk_norm: bool = False
    activation: str = "gelu"
    zero_init_residual: bool = False
    logit_softcap: float | None = None
    unet_skips: bool = False
    value_embeddings: int = 0

    def __post_init__(self) -> None:
        check_field_types(self)
        choices_of = (
            ("arch", ARCHS),
            ("norm", NORMS),
            ("position", POSITIONS),
            ("parametrization", PARAMETRIZATIONS),
            ("activation", ACTIVATIONS),
        )
        for name, choices in choices_of:
            value = getattr(self, name)
            if value not in choices:
                raise ValueError(
                    f"{name}={value!r} is unknown; choose one of: {', '.join(choices)}"
                )
        positive = ("vocab_size", "max_seq_len", "hidden_size", "num_layers", "num_heads")
        for name in (*positive, "mup_base_width"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name}={value} must be a positive integer")
        if self.intermediate_size is not None and self.intermediate_size <= 0:
            raise ValueError(
                f"intermediate_size={self.intermediate_size} must be a positive integer, or "
                "null for 4 * hidden_size"
            )
        check_head_count("hidden_size", self.hidden_size, self.num_heads)
        if self.num_kv_heads is not None:
            check_kv_heads(self.num_heads, self.num_kv_heads)
        if self.position == "rope":
            check_rotary_dim(self.hidden_size // self.num_heads)
        for name in ("dropout", "attn_dropout", "resid_dropout", "embd_dropout"):
            value = getattr(self, name)
            if value is not None:
                check_dropout(name, value)
        if self.type_vocab_size < 0:
            raise ValueError(
                f"type_vocab_size={self.type_vocab_size} must be >= 0 (0 = no token types)"
            )
        if self.type_vocab_size > 0 and self.arch == "decoder":
            raise ValueError(
                f"type_vocab_size={self.type_vocab_size} is for the encoder (BERT segments); "
                "set it to 0 for arch='decoder'"
            )
        for name in ("mup_output_multiplier", "mup_attention_multiplier"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)} must be > 0, e.g. 1.0")
        if self.logit_softcap is not None and not self.logit_softcap > 0:
            raise ValueError(
                f"logit_softcap={self.logit_softcap} must be > 0 (e.g. 30.0), or null for no cap"
            )
        if not 0 <= self.value_embeddings <= self.num_layers // 2:
            raise ValueError(
                f"value_embeddings={self.value_embeddings} must be in [0, num_layers // 2 = "
                f"{self.num_layers // 2}]: table i serves layer i and layer num_layers - n + i"
            )
        if self.layer_norm_eps <= 0:
            raise ValueError(f"layer_norm_eps={self.layer_norm_eps} must be > 0, e.g. 1e-5")
        # Without a vocabulary yet (None), only the lower bound can be checked.
        vocab_end = math.inf if self.vocab_size is None else self.vocab_size
        if self.pad_token_id is not None and not 0 <= self.pad_token_id < vocab_end:
            raise ValueError(
                f"pad_token_id={self.pad_token_id} is outside the vocabulary "
                f"[0, vocab_size={self.vocab_size})"
            )

    @property
    def mlp_size(self) -> int:
        """Hidden width of the MLP: ``intermediate_size`` or 4 * hidden_size."""
        return self.intermediate_size or 4 * self.hidden_size

    @property
    def width_multiplier(self) -> float:
        """μP's width multiplier m = hidden_size / mup_base_width; 1 under the standard
        parametrization, where nothing scales with width."""
        if self.parametrization == "standard":
            return 1.0
        return self.hidden_size / self.mup_base_width

    @property
    def readout_multiplier(self) -> float:
        """What μP multiplies the readout's input by: ``mup_output_multiplier`` / m."""
        if self.parametrization == "standard":
            return 1.0
        return self.mup_output_multiplier / self.width_multiplier

    @property
    def attention_scale(self) -> float | None:
        """The attention scores' factor when it is not SDPA's default 1 / sqrt(D): μP's
        1 / D, as sqrt(D_base) / D so that it is the default at the base width, times
        ``mup_attention_multiplier``."""
        if self.parametrization == "standard" or (
            self.width_multiplier == 1.0 and self.mup_attention_multiplier == 1.0
        ):
            return None
        head_dim = self.hidden_size // self.num_heads
        base = math.sqrt(self.mup_base_width / self.num_heads) / head_dim
        return self.mup_attention_multiplier * base

    @property
    def attn_dropout_p(self) -> float:
        return self.dropout if self.attn_dropout is None else self.attn_dropout

    @property
    def resid_dropout_p(self) -> float:
        return self.dropout if self.resid_dropout is None else self.resid_dropout

    @property
    def embd_dropout_p(self) -> float:
        return self.dropout if self.embd_dropout is None else self.embd_dropout

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelConfig:
        """Build from a mapping (YAML, checkpoint), rejecting unknown and missing keys."""
        return from_mapping(cls, d, "model.")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields, safe for ``torch.load(weights_only=True)``."""
        return dataclasses.asdict(self)
