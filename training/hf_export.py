"""A tinylm network as a Hugging Face ``transformers`` folder, loadable without tinylm.

The decoder is GPT-2 (pre-LN, learned positions, exact GELU, tied head), or GPT-NeoX with
rotary positions (``model.position=rope``: the same half-split rotation, over the whole head,
base 10000, sequential residuals), and the encoder BERT (post-LN, MLM head tied to the token
table with its own bias), weight for weight, so the export is a renaming plus a few exact
rewrites: a sinusoidal position table becomes a learned one holding the same values,
``qkv_bias=false`` becomes zero biases, GPT-NeoX's fused projection takes the rows of each
head's q, k, v together, and an encoder without token types gets a single all-zero
token-type row (BERT always adds one). Settings with no exact equivalent are refused, naming
the setting.

``transformers`` is an optional dependency (``pip install -e ".[hf]"``): it is imported here
only, when an export to it is asked for.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, processors
from torch import Tensor

from data.tokenizer import special_tokens_of, tokenizer_from_json
from models.attention import ROPE_BASE
from models.config import ModelConfig
from models.transformer import Decoder, Encoder
from training.checkpoint import LoadedCheckpoint, check_output_free

# family -> (the transformers class, the LayerNorm layout it hard-codes)
HF_FAMILIES = {
    "GPT-2": ("GPT2LMHeadModel", "pre"),
    "GPT-NeoX": ("GPTNeoXForCausalLM", "pre"),
    "BERT": ("BertForMaskedLM", "post"),
}


def hf_family(cfg: ModelConfig) -> str:
    """The Hugging Face architecture a tinylm model config exports to."""
    if cfg.arch == "encoder":
        return "BERT"
    return "GPT-NeoX" if cfg.position == "rope" else "GPT-2"


def require_transformers() -> Any:
    """The ``transformers`` module, or a one-line error that says how to install it."""
    try:
        import transformers
    except ImportError:
        raise ValueError(
            'export.format=hf needs Hugging Face transformers: pip install -e ".[hf]" (or pip '
            "install transformers); export.format=safetensors needs nothing more"
        ) from None
    return transformers


def check_exportable(cfg: ModelConfig) -> None:
    """Refuse the settings GPT-2 / GPT-NeoX / BERT cannot reproduce exactly, naming each."""
    family = hf_family(cfg)
    norm = HF_FAMILIES[family][1]
    problems = []
    if cfg.norm != norm:
        problems.append(f"model.norm={cfg.norm} ({family} is {norm}-LN)")
    if family != "GPT-2" and cfg.embd_dropout_p != cfg.resid_dropout_p:
        # BERT's hidden_dropout_prob (GPT-NeoX's hidden_dropout) serves both the embeddings
        # and the residual branches.
        name = "hidden_dropout_prob" if family == "BERT" else "hidden_dropout"
        problems.append(
            f"model.embd_dropout={cfg.embd_dropout_p} differs from the residual dropout "
            f"{cfg.resid_dropout_p} ({family} has one {name} for both)"
        )
    if family == "BERT" and cfg.position == "rope":
        problems.append(f"model.position=rope ({family} adds a learned position table)")
    if cfg.num_kv_heads not in (None, cfg.num_heads):
        problems.append(
            f"model.num_kv_heads={cfg.num_kv_heads} ({family} has one key/value head per "
            f"query head, {cfg.num_heads})"
        )
    if problems:
        raise ValueError(
            f"this {cfg.arch} has no exact {family} equivalent: {'; '.join(problems)}. "
            "export.format=safetensors keeps every setting"
        )


def hf_config(cfg: ModelConfig, tokenizer: Tokenizer) -> Any:
    """The ``GPT2Config`` or ``GPTNeoXConfig`` (decoder) or ``BertConfig`` (encoder) of a
    tinylm model config."""
    transformers = require_transformers()
    check_exportable(cfg)
    specials = special_tokens_of(tokenizer)
    common = {
        "vocab_size": cfg.vocab_size,
        "pad_token_id": specials.pad_id,
        "tie_word_embeddings": cfg.tie_embeddings,
    }
    # The sizes under the names BERT and GPT-NeoX share.
    sizes = {
        "hidden_size": cfg.hidden_size,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "intermediate_size": cfg.mlp_size,
        "hidden_act": "gelu",  # exact (erf) GELU, as nn.GELU()
        "max_position_embeddings": cfg.max_seq_len,
        "layer_norm_eps": cfg.layer_norm_eps,
    }
    family = hf_family(cfg)
    if family == "GPT-NeoX":
        return transformers.GPTNeoXConfig(
            **common,
            **sizes,
            hidden_dropout=cfg.resid_dropout_p,
            attention_dropout=cfg.attn_dropout_p,
            use_parallel_residual=False,  # x + attn(ln(x)), then + mlp(ln(.)), as tinylm
            attention_bias=True,  # qkv_bias=false exports zero biases
            rope_parameters={
                "rope_type": "default",
                "rope_theta": ROPE_BASE,
                "partial_rotary_factor": 1.0,  # tinylm rotates every head dimension
            },
            bos_token_id=specials.eos_id,
            eos_token_id=specials.eos_id,
        )
    if family == "GPT-2":
        return transformers.GPT2Config(
            **common,
            n_positions=cfg.max_seq_len,
            n_embd=cfg.hidden_size,
            n_layer=cfg.num_layers,
            n_head=cfg.num_heads,
            n_inner=cfg.mlp_size,
            activation_function="gelu",  # exact (erf) GELU, as nn.GELU()
            resid_pdrop=cfg.resid_dropout_p,
            embd_pdrop=cfg.embd_dropout_p,
            attn_pdrop=cfg.attn_dropout_p,
            layer_norm_epsilon=cfg.layer_norm_eps,
            # GPT-2's convention: one <|endoftext|> token starts and ends documents.
            bos_token_id=specials.eos_id,
            eos_token_id=specials.eos_id,
        )
    return transformers.BertConfig(
        **common,
        **sizes,
        hidden_dropout_prob=cfg.resid_dropout_p,
        attention_probs_dropout_prob=cfg.attn_dropout_p,
        type_vocab_size=max(1, cfg.type_vocab_size),
    )


def hf_state_dict(model: Encoder | Decoder) -> dict[str, Tensor]:
    """Every parameter of the GPT2LMHeadModel / GPTNeoXForCausalLM / BertForMaskedLM, under
    its transformers name (tied names included, holding the tied tensor)."""
    cfg = model.config
    emb = model.embeddings
    positions = emb.position.weight if emb.position is not None else emb.sinusoid  # None: rope
    width = cfg.hidden_size

    def bias(linear: torch.nn.Linear) -> Tensor:
        return linear.bias if linear.bias is not None else torch.zeros(linear.out_features)

    def norm(prefix: str, layer: torch.nn.LayerNorm) -> dict[str, Tensor]:
        return {f"{prefix}.weight": layer.weight, f"{prefix}.bias": layer.bias}

    def linear(prefix: str, layer: torch.nn.Linear) -> dict[str, Tensor]:
        return {f"{prefix}.weight": layer.weight, f"{prefix}.bias": bias(layer)}

    out: dict[str, Tensor] = {}
    if hf_family(cfg) == "GPT-NeoX":
        heads, head_dim = cfg.num_heads, width // cfg.num_heads

        def per_head_qkv(t: Tensor) -> Tensor:
            # tinylm's rows [q; k; v] (heads contiguous in each) -> GPT-NeoX's [q_h; k_h; v_h]
            # per head h, which it views as [..., H, 3 D] and splits.
            return t.unflatten(0, (3, heads, head_dim)).transpose(0, 1).flatten(0, 2)

        out["gpt_neox.embed_in.weight"] = emb.token.weight
        for i, block in enumerate(model.blocks):
            p = f"gpt_neox.layers.{i}"
            qkv = block.attn.qkv_proj
            out |= norm(f"{p}.input_layernorm", block.attn_norm)
            out[f"{p}.attention.query_key_value.weight"] = per_head_qkv(qkv.weight)
            out[f"{p}.attention.query_key_value.bias"] = per_head_qkv(bias(qkv))
            out |= linear(f"{p}.attention.dense", block.attn.out_proj)
            out |= norm(f"{p}.post_attention_layernorm", block.mlp_norm)
            out |= linear(f"{p}.mlp.dense_h_to_4h", block.mlp.fc1)
            out |= linear(f"{p}.mlp.dense_4h_to_h", block.mlp.fc2)
        out |= norm("gpt_neox.final_layer_norm", model.final_norm)
        out["lm_head.weight"] = model.lm_head.weight
        return out
    if isinstance(model, Decoder):
        # GPT-2's Conv1D stores [in, out], the transpose of nn.Linear's [out, in]; its fused
        # c_attn splits q, k, v in that order, heads contiguous within each: tinylm's layout.
        def conv1d(prefix: str, layer: torch.nn.Linear) -> dict[str, Tensor]:
            return {**linear(prefix, layer), f"{prefix}.weight": layer.weight.t()}

        out["transformer.wte.weight"] = emb.token.weight
        out["transformer.wpe.weight"] = positions
        for i, block in enumerate(model.blocks):
            p = f"transformer.h.{i}"
            out |= norm(f"{p}.ln_1", block.attn_norm)
            out |= conv1d(f"{p}.attn.c_attn", block.attn.qkv_proj)
            out |= conv1d(f"{p}.attn.c_proj", block.attn.out_proj)
            out |= norm(f"{p}.ln_2", block.mlp_norm)
            out |= conv1d(f"{p}.mlp.c_fc", block.mlp.fc1)
            out |= conv1d(f"{p}.mlp.c_proj", block.mlp.fc2)
        out |= norm("transformer.ln_f", model.final_norm)
        out["lm_head.weight"] = model.lm_head.weight
        return out

    out["bert.embeddings.word_embeddings.weight"] = emb.token.weight
    out["bert.embeddings.position_embeddings.weight"] = positions
    out["bert.embeddings.token_type_embeddings.weight"] = (
        emb.token_type.weight if emb.token_type is not None else torch.zeros(1, width)
    )
    out |= norm("bert.embeddings.LayerNorm", emb.norm)
    for i, block in enumerate(model.blocks):
        p = f"bert.encoder.layer.{i}"
        qkv = block.attn.qkv_proj
        weights, biases = qkv.weight.split(width), bias(qkv).split(width)  # rows [q; k; v]
        for name, w, b in zip(("query", "key", "value"), weights, biases, strict=True):
            out[f"{p}.attention.self.{name}.weight"] = w
            out[f"{p}.attention.self.{name}.bias"] = b
        out |= linear(f"{p}.attention.output.dense", block.attn.out_proj)
        out |= norm(f"{p}.attention.output.LayerNorm", block.attn_norm)
        out |= linear(f"{p}.intermediate.dense", block.mlp.fc1)
        out |= linear(f"{p}.output.dense", block.mlp.fc2)
        out |= norm(f"{p}.output.LayerNorm", block.mlp_norm)
    head = model.mlm_head
    out |= linear("cls.predictions.transform.dense", head.dense)
    out |= norm("cls.predictions.transform.LayerNorm", head.norm)
    out |= linear("cls.predictions.decoder", head.proj)
    # BERT keeps the output bias twice (tied when the head is): both hold tinylm's one bias.
    out["cls.predictions.bias"] = head.proj.bias
    return out


def to_hf_model(model: Encoder | Decoder, tokenizer: Tokenizer) -> Any:
    """A GPT2LMHeadModel / GPTNeoXForCausalLM / BertForMaskedLM (eval mode, CPU, fp32)
    computing what ``model`` computes."""
    transformers = require_transformers()
    config = hf_config(model.config, tokenizer)
    cls = getattr(transformers, HF_FAMILIES[hf_family(model.config)][0])
    hf_model = cls(config)
    mapped = hf_state_dict(model)
    params = dict(hf_model.named_parameters(remove_duplicate=False))
    if params.keys() != mapped.keys():
        # A transformers release that renames or adds parameters: say which, do not guess.
        missing, extra = (
            sorted(params.keys() - mapped.keys()),
            sorted(mapped.keys() - params.keys()),
        )
        raise RuntimeError(
            f"transformers {transformers.__version__} lays out {cls.__name__} differently: "
            f"unmapped {missing}, unknown {extra}"
        )
    with torch.no_grad():
        for name, param in params.items():
            param.copy_(mapped[name].float())
    return hf_model.eval()


def hf_tokenizer(tokenizer: Tokenizer, cfg: ModelConfig) -> Any:
    """The tokenizer as a ``PreTrainedTokenizerFast`` with its special tokens named.

    tinylm's tokenizers add no special tokens (the data pipeline does). transformers users
    expect the tokenizer to frame an encoder's input, so the encoder's gets BERT's
    ``[CLS] text [SEP]`` template (tinylm's training examples); ``add_special_tokens=False``
    gives tinylm's ids exactly. The decoder's encodes exactly as tinylm's, as GPT-2's does.
    """
    transformers = require_transformers()
    tokenizer = Tokenizer.from_str(tokenizer.to_str())  # a copy: the template is ours only
    specials = special_tokens_of(tokenizer)
    named = {
        "pad_token": specials.pad,
        "eos_token": specials.eos,
        "cls_token": specials.cls,
        "sep_token": specials.sep,
        "mask_token": specials.mask,
    }
    if tokenizer.token_to_id("[UNK]") is not None:
        named["unk_token"] = "[UNK]"
    if cfg.arch == "encoder":
        cls, sep = specials.cls, specials.sep
        second = ":1" if cfg.type_vocab_size > 1 else ""  # one token type: segment 0 only
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{cls} $A {sep}",
            pair=f"{cls} $A {sep} $B{second} {sep}{second}",
            special_tokens=[(cls, specials.cls_id), (sep, specials.sep_id)],
        )
    else:
        named["bos_token"] = specials.eos
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        model_max_length=cfg.max_seq_len,
        # Batched generation wants the prompts' last tokens aligned, as Decoder.generate does.
        padding_side="left" if cfg.arch == "decoder" else "right",
        **named,
    )


def export_hf(loaded: LoadedCheckpoint, out_dir: str | Path, overwrite: bool = False) -> Path:
    """Write the checkpoint as a transformers folder: config.json, model.safetensors,
    generation_config.json (decoder), tokenizer.json, tokenizer_config.json and
    special_tokens_map.json. The folder appears whole or not at all; an existing one is
    replaced only with ``overwrite``."""
    out_dir = Path(out_dir)
    check_output_free(out_dir, overwrite)
    require_transformers()
    tokenizer = tokenizer_from_json(loaded.tokenizer_json)
    hf_model = to_hf_model(loaded.model, tokenizer)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        hf_model.save_pretrained(staging)
        hf_tokenizer(tokenizer, loaded.config).save_pretrained(staging)
        if out_dir.exists():  # overwrite=True: swap, then drop the old folder
            old = staging.with_name(staging.name + ".old")
            out_dir.rename(old)
            staging.rename(out_dir)
            if old.is_dir():
                shutil.rmtree(old)
            else:
                old.unlink()
        else:
            staging.rename(out_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return out_dir
