"""The Hugging Face architectures a tinylm network exports to, weight for weight: GPT-2 (the
decoder with learned or sinusoidal positions), GPT-NeoX (rope) and BERT (the encoder).

Each ``HFFamily`` decides every ``ModelConfig`` field once: ``maps`` names where transformers
holds a field it reproduces for every value (``renames``: a config key holding the value as it
is; ``notes``: the others), ``refusals`` the values it has no exact equivalent for, with the
reason. ``tests/training/test_hf_families.py`` walks the fields, so a new model option fails
the tests until every family has decided it. transformers is imported by ``hf_export`` only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from data.tokenizer import SpecialTokens
from models.attention import ROPE_BASE
from models.config import ModelConfig
from models.transformer import Decoder, Encoder


@dataclass(frozen=True)
class Refusal:
    """Values of one ``ModelConfig`` field a family cannot reproduce exactly."""

    field: str
    refuses: Callable[[ModelConfig], bool]
    reason: Callable[[ModelConfig], str]  # "model.FIELD=VALUE (why)"


@dataclass(frozen=True)
class HFFamily:
    """A transformers architecture, the tinylm configs it takes and how it holds them."""

    name: str  # as messages say it
    model_class: str  # the transformers class names
    config_class: str
    arch: str  # the ModelConfig.arch and .position values it takes
    positions: tuple[str, ...]
    renames: Mapping[str, str]  # field -> the transformers config key holding its value
    notes: Mapping[str, str]  # the other fields exported -> how transformers holds them
    refusals: tuple[Refusal, ...]
    settings: Callable[[ModelConfig, SpecialTokens], dict[str, Any]]  # the config's other keys
    weights: Callable[[Encoder | Decoder], dict[str, Tensor]]  # every transformers parameter

    @property
    def maps(self) -> dict[str, str]:
        """Every field exported for all its values -> where transformers holds it."""
        return {**self.renames, **self.notes}

    def config_kwargs(self, cfg: ModelConfig, specials: SpecialTokens) -> dict[str, Any]:
        """The transformers config of ``cfg``, as keyword arguments."""
        renamed = {key: getattr(cfg, _RESOLVED.get(f, f)) for f, key in self.renames.items()}
        return renamed | {"pad_token_id": specials.pad_id} | self.settings(cfg, specials)

    def check(
        self, cfg: ModelConfig, remedy: str = "export.format=safetensors keeps every setting"
    ) -> None:
        """Refuse the settings this family cannot reproduce exactly, naming each, in one error."""
        problems = [refusal.reason(cfg) for refusal in self.refusals if refusal.refuses(cfg)]
        if problems:
            raise ValueError(
                f"this {cfg.arch} has no exact {self.name} equivalent: {'; '.join(problems)}. "
                f"{remedy}"
            )


# ------------------------------------------------------------------ refusals shared by name


def layer_norm_layout(family: str, norm: str) -> Refusal:
    """The family hard-codes one LayerNorm layout."""
    return Refusal(
        "norm",
        lambda cfg: cfg.norm != norm,
        lambda cfg: f"model.norm={cfg.norm} ({family} is {norm}-LN)",
    )


def one_kv_head_per_query_head(family: str) -> Refusal:
    """No grouped-query attention: num_kv_heads None or num_heads is plain multi-head."""
    return Refusal(
        "num_kv_heads",
        lambda cfg: cfg.num_kv_heads not in (None, cfg.num_heads),
        lambda cfg: (
            f"model.num_kv_heads={cfg.num_kv_heads} ({family} has one key/value head per "
            f"query head, {cfg.num_heads})"
        ),
    )


def one_hidden_dropout(family: str, hf_name: str) -> Refusal:
    """One dropout rate (``hf_name``) serves both the embeddings and the residual branches."""
    return Refusal(
        "embd_dropout",
        lambda cfg: cfg.embd_dropout_p != cfg.resid_dropout_p,
        lambda cfg: (
            f"model.embd_dropout={cfg.embd_dropout_p} differs from the residual dropout "
            f"{cfg.resid_dropout_p} ({family} has one {hf_name} for both)"
        ),
    )


def speed_run_options(family: str) -> tuple[Refusal, ...]:
    """The speed-run options none of the families has: each refused away from its default."""
    missing = {
        "qk_norm": "normalises no queries and keys",
        "logit_softcap": "caps no logits",
        "unet_skips": "has no skips between layers",
        "value_embeddings": "has no value embeddings",
    }
    defaults = {f.name: f.default for f in dataclasses.fields(ModelConfig)}
    return tuple(
        Refusal(
            name,
            lambda cfg, name=name: getattr(cfg, name) != defaults[name],
            lambda cfg, name=name, what=what: (
                f"model.{name}={getattr(cfg, name)} ({family} {what})"
            ),
        )
        for name, what in missing.items()
    )


# ------------------------------------------------------------------------- weights, renamed


def _bias(layer: nn.Module) -> Tensor:
    """The bias, zeros for ``qkv_bias=false``."""
    return layer.bias if layer.bias is not None else torch.zeros(layer.out_features)


def _params(prefix: str, layer: nn.Module, conv1d: bool = False) -> dict[str, Tensor]:
    """A linear layer's or LayerNorm's weight and bias; ``conv1d``: the weight as GPT-2's Conv1D
    holds it, [in, out], the transpose of nn.Linear's."""
    weight = layer.weight.t() if conv1d else layer.weight
    return {f"{prefix}.weight": weight, f"{prefix}.bias": _bias(layer)}


def _position_table(model: Encoder | Decoder) -> Tensor:
    """The learned table, or the sinusoid's values for a learned one to hold: [T, C]."""
    emb = model.embeddings
    return emb.position.weight if emb.position is not None else emb.sinusoid


# The fields whose value is a property of ModelConfig's, with its default resolved.
_RESOLVED = {
    "intermediate_size": "mlp_size",
    "attn_dropout": "attn_dropout_p",
    "resid_dropout": "resid_dropout_p",
    "embd_dropout": "embd_dropout_p",
}
_COMMON_RENAMES = {"vocab_size": "vocab_size", "tie_embeddings": "tie_word_embeddings"}
_SHARED_SIZE_RENAMES = {  # the names BERT and GPT-NeoX share
    "max_seq_len": "max_position_embeddings",
    "hidden_size": "hidden_size",
    "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads",
    "intermediate_size": "intermediate_size",
    "layer_norm_eps": "layer_norm_eps",
}
_COMMON_NOTES = {
    "pad_token_id": "pad_token_id (the tokenizer's padding id, as the app fills it in)",
    "qkv_bias": "the q, k, v biases (zeros for qkv_bias=false)",
    "parametrization": "mup: folded into the query rows and the readout's LayerNorm",
    "mup_base_width": "folded with parametrization=mup",
    "mup_zero_init": "nothing: the initialisation only",
    "mup_output_multiplier": "folded into the readout's LayerNorm",
    "mup_attention_multiplier": "folded into the query rows",
    "zero_init_residual": "nothing: the initialisation only",
}
# transformers' ACT2FN names of the MLP activations: exact (erf) GELU as nn.GELU(), and ReLU².
_HF_ACTIVATIONS = {"gelu": "gelu", "relu2": "relu2"}


# ------------------------------------------------------------------------------------ GPT-2


def _gpt2_settings(cfg: ModelConfig, specials: SpecialTokens) -> dict[str, Any]:
    return {
        "activation_function": _HF_ACTIVATIONS[cfg.activation],
        # GPT-2's convention: one <|endoftext|> token starts and ends documents.
        "bos_token_id": specials.eos_id,
        "eos_token_id": specials.eos_id,
    }


def _gpt2_weights(model: Decoder) -> dict[str, Tensor]:
    # GPT-2's fused c_attn is tinylm's layout: q, k, v, heads contiguous within each.
    out = {
        "transformer.wte.weight": model.embeddings.token.weight,
        "transformer.wpe.weight": _position_table(model),
    }
    for i, block in enumerate(model.blocks):
        p = f"transformer.h.{i}"
        out |= _params(f"{p}.ln_1", block.attn_norm)
        out |= _params(f"{p}.attn.c_attn", block.attn.qkv_proj, conv1d=True)
        out |= _params(f"{p}.attn.c_proj", block.attn.out_proj, conv1d=True)
        out |= _params(f"{p}.ln_2", block.mlp_norm)
        out |= _params(f"{p}.mlp.c_fc", block.mlp.fc1, conv1d=True)
        out |= _params(f"{p}.mlp.c_proj", block.mlp.fc2, conv1d=True)
    out |= _params("transformer.ln_f", model.final_norm)
    out["lm_head.weight"] = model.lm_head.weight
    return out


GPT2 = HFFamily(
    name="GPT-2",
    model_class="GPT2LMHeadModel",
    config_class="GPT2Config",
    arch="decoder",
    positions=("learned", "sinusoidal"),
    renames={
        **_COMMON_RENAMES,
        "max_seq_len": "n_positions",
        "hidden_size": "n_embd",
        "num_layers": "n_layer",
        "num_heads": "n_head",
        "intermediate_size": "n_inner",
        "layer_norm_eps": "layer_norm_epsilon",
        "attn_dropout": "attn_pdrop",
        "resid_dropout": "resid_pdrop",
        "embd_dropout": "embd_pdrop",
    },
    notes={
        **_COMMON_NOTES,
        "arch": "GPT2LMHeadModel (causal, LM head)",
        "dropout": "attn_pdrop, resid_pdrop, embd_pdrop (where not overridden)",
        "position": "wpe (learned, or holding the sinusoid's values)",
        "type_vocab_size": "nothing: a decoder has no token types",
        "activation": "activation_function",
    },
    refusals=(
        layer_norm_layout("GPT-2", "pre"),
        one_kv_head_per_query_head("GPT-2"),
        *speed_run_options("GPT-2"),
    ),
    settings=_gpt2_settings,
    weights=_gpt2_weights,
)


# --------------------------------------------------------------------------------- GPT-NeoX


def _gpt_neox_settings(cfg: ModelConfig, specials: SpecialTokens) -> dict[str, Any]:
    return {
        "hidden_act": _HF_ACTIVATIONS[cfg.activation],
        "use_parallel_residual": False,  # x + attn(ln(x)), then + mlp(ln(.)), as tinylm
        "attention_bias": True,  # qkv_bias=false exports zero biases
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": ROPE_BASE,
            "partial_rotary_factor": 1.0,  # tinylm rotates every head dimension
        },
        "bos_token_id": specials.eos_id,
        "eos_token_id": specials.eos_id,
    }


def _gpt_neox_weights(model: Decoder) -> dict[str, Tensor]:
    cfg = model.config
    heads, head_dim = cfg.num_heads, cfg.hidden_size // cfg.num_heads

    def per_head_qkv(t: Tensor) -> Tensor:
        # tinylm's rows [q; k; v] (heads contiguous in each) -> GPT-NeoX's [q_h; k_h; v_h]
        # per head h, which it views as [..., H, 3 D] and splits.
        return t.unflatten(0, (3, heads, head_dim)).transpose(0, 1).flatten(0, 2)

    out = {"gpt_neox.embed_in.weight": model.embeddings.token.weight}
    for i, block in enumerate(model.blocks):
        p = f"gpt_neox.layers.{i}"
        qkv = block.attn.qkv_proj
        out |= _params(f"{p}.input_layernorm", block.attn_norm)
        out[f"{p}.attention.query_key_value.weight"] = per_head_qkv(qkv.weight)
        out[f"{p}.attention.query_key_value.bias"] = per_head_qkv(_bias(qkv))
        out |= _params(f"{p}.attention.dense", block.attn.out_proj)
        out |= _params(f"{p}.post_attention_layernorm", block.mlp_norm)
        out |= _params(f"{p}.mlp.dense_h_to_4h", block.mlp.fc1)
        out |= _params(f"{p}.mlp.dense_4h_to_h", block.mlp.fc2)
    out |= _params("gpt_neox.final_layer_norm", model.final_norm)
    out["lm_head.weight"] = model.lm_head.weight
    return out


GPT_NEOX = HFFamily(
    name="GPT-NeoX",
    model_class="GPTNeoXForCausalLM",
    config_class="GPTNeoXConfig",
    arch="decoder",
    positions=("rope",),
    renames={
        **_COMMON_RENAMES,
        **_SHARED_SIZE_RENAMES,
        "attn_dropout": "attention_dropout",
        "resid_dropout": "hidden_dropout",
    },
    notes={
        **_COMMON_NOTES,
        "arch": "GPTNeoXForCausalLM (causal, LM head)",
        "dropout": "attention_dropout, hidden_dropout (where not overridden)",
        "position": "rope_parameters (base 10000, every head dimension)",
        "type_vocab_size": "nothing: a decoder has no token types",
        "activation": "hidden_act",
    },
    refusals=(
        layer_norm_layout("GPT-NeoX", "pre"),
        one_kv_head_per_query_head("GPT-NeoX"),
        one_hidden_dropout("GPT-NeoX", "hidden_dropout"),
        *speed_run_options("GPT-NeoX"),
    ),
    settings=_gpt_neox_settings,
    weights=_gpt_neox_weights,
)


# ------------------------------------------------------------------------------------- BERT


def _bert_settings(cfg: ModelConfig, specials: SpecialTokens) -> dict[str, Any]:
    # BERT always adds a token-type row
    return {
        "hidden_act": _HF_ACTIVATIONS[cfg.activation],
        "type_vocab_size": max(1, cfg.type_vocab_size),
    }


def _bert_weights(model: Encoder) -> dict[str, Tensor]:
    emb, width = model.embeddings, model.config.hidden_size
    out = {
        "bert.embeddings.word_embeddings.weight": emb.token.weight,
        "bert.embeddings.position_embeddings.weight": _position_table(model),
        "bert.embeddings.token_type_embeddings.weight": (
            emb.token_type.weight if emb.token_type is not None else torch.zeros(1, width)
        ),
    }
    out |= _params("bert.embeddings.LayerNorm", emb.norm)
    for i, block in enumerate(model.blocks):
        p = f"bert.encoder.layer.{i}"
        qkv = block.attn.qkv_proj
        weights, biases = qkv.weight.split(width), _bias(qkv).split(width)  # rows [q; k; v]
        for name, w, b in zip(("query", "key", "value"), weights, biases, strict=True):
            out[f"{p}.attention.self.{name}.weight"] = w
            out[f"{p}.attention.self.{name}.bias"] = b
        out |= _params(f"{p}.attention.output.dense", block.attn.out_proj)
        out |= _params(f"{p}.attention.output.LayerNorm", block.attn_norm)
        out |= _params(f"{p}.intermediate.dense", block.mlp.fc1)
        out |= _params(f"{p}.output.dense", block.mlp.fc2)
        out |= _params(f"{p}.output.LayerNorm", block.mlp_norm)
    head = model.mlm_head
    out |= _params("cls.predictions.transform.dense", head.dense)
    out |= _params("cls.predictions.transform.LayerNorm", head.norm)
    out |= _params("cls.predictions.decoder", head.proj)
    # BERT keeps the output bias twice: both hold tinylm's one bias.
    out["cls.predictions.bias"] = head.proj.bias
    return out


BERT = HFFamily(
    name="BERT",
    model_class="BertForMaskedLM",
    config_class="BertConfig",
    arch="encoder",
    positions=("learned", "sinusoidal", "rope"),  # rope only to refuse it by name
    renames={
        **_COMMON_RENAMES,
        **_SHARED_SIZE_RENAMES,
        "attn_dropout": "attention_probs_dropout_prob",
        "resid_dropout": "hidden_dropout_prob",
    },
    notes={
        **_COMMON_NOTES,
        "arch": "BertForMaskedLM (bidirectional, MLM head)",
        "dropout": "attention_probs_dropout_prob, hidden_dropout_prob (where not overridden)",
        "type_vocab_size": "type_vocab_size (one all-zero row for 0)",
        "activation": "hidden_act",
    },
    refusals=(
        layer_norm_layout("BERT", "post"),
        one_kv_head_per_query_head("BERT"),
        one_hidden_dropout("BERT", "hidden_dropout_prob"),
        *speed_run_options("BERT"),
        Refusal(
            "position",
            lambda cfg: cfg.position == "rope",
            lambda cfg: "model.position=rope (BERT adds a learned position table)",
        ),
    ),
    settings=_bert_settings,
    weights=_bert_weights,
)

HF_FAMILIES = (GPT2, GPT_NEOX, BERT)


def hf_family(cfg: ModelConfig) -> HFFamily:
    """The family a tinylm model config exports to: the one taking its arch and position."""
    (family,) = [f for f in HF_FAMILIES if f.arch == cfg.arch and cfg.position in f.positions]
    return family
