"""Encoder (BERT-style) and Decoder (GPT-style) Transformers built on ``models.attention``.
Forward returns the logits, or ``ModelOutput`` with ``output_attentions=True``, so the common
call stays a plain tensor; losses belong to ``training/task.py``.

Notation: B batch, T length, T_k key length (cached keys included), C hidden_size, H heads,
D = C // H, I MLP width, L layers, V vocab_size.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models.attention import KVCache, MultiHeadAttention, RotaryEmbedding, check_head_gate
from models.config import ModelConfig
from models.positions import check_document_ids, document_layout, position_ids, sinusoidal_table
from models.sampling import check_sampling_args, sample_next_token


class ModelOutput(NamedTuple):
    """What forward returns when ``output_attentions=True``."""

    logits: Tensor  # (B, T, V)
    attentions: tuple[Tensor, ...]  # L x (B, H, T, T_k) probabilities, before dropout


class MaskPrediction(NamedTuple):
    """The ``top_k`` most likely tokens at one masked position, most likely first."""

    position: int
    token_ids: list[int]
    probs: list[float]


class Embeddings(nn.Module):
    """Token + position (+ token-type) embeddings, LayerNorm when post-LN (BERT), dropout;
    rotary positions are added by the attention layers instead."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.token = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.position: nn.Embedding | None = None
        if cfg.position == "learned":
            self.position = nn.Embedding(cfg.max_seq_len, cfg.hidden_size)
        table = None
        if cfg.position == "sinusoidal":
            table = sinusoidal_table(cfg.max_seq_len, cfg.hidden_size)
        # Not persistent: it is a function of the config, so checkpoints need not carry it.
        self.register_buffer("sinusoid", table, persistent=False)  # (T, C) or None
        self.token_type: nn.Embedding | None = None
        if cfg.type_vocab_size > 0:
            self.token_type = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.norm: nn.LayerNorm | None = None
        if cfg.norm == "post":  # BERT normalises the embeddings; pre-LN blocks do it themselves
            self.norm = nn.LayerNorm(cfg.hidden_size, cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.embd_dropout_p)

    def forward(
        self, input_ids: Tensor, position_ids: Tensor, token_type_ids: Tensor | None = None
    ) -> Tensor:
        x = self.token(input_ids)  # (B, T, C)
        if self.position is not None:
            x = x + self.position(position_ids)  # (B|1, T, C) broadcast
        elif self.sinusoid is not None:
            x = x + F.embedding(position_ids, self.sinusoid)  # (B|1, T, C)
        if self.token_type is not None:
            if token_type_ids is None:  # BERT's default: every token is segment 0
                token_type_ids = torch.zeros_like(input_ids)
            x = x + self.token_type(token_type_ids)  # (B, T, C)
        elif token_type_ids is not None:
            raise ValueError("token_type_ids given but type_vocab_size=0; set type_vocab_size")
        if self.norm is not None:
            x = self.norm(x)
        return self.dropout(x)  # (B, T, C)


class ReLUSquared(nn.Module):
    """relu(x)², the MLP activation of Primer (So et al. 2021) and modded-nanogpt."""

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x).square()


def activation(cfg: ModelConfig) -> nn.Module:
    """The MLP's (and BERT's head's) nonlinearity, as transformers' ``hidden_act`` applies it
    in both."""
    return nn.GELU() if cfg.activation == "gelu" else ReLUSquared()


class MLP(nn.Module):
    """Position-wise feed-forward: Linear(C, I), GELU or ReLU², Linear(I, C), dropout."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(cfg.hidden_size, cfg.mlp_size)
        self.act = activation(cfg)
        self.fc2 = nn.Linear(cfg.mlp_size, cfg.hidden_size)  # residual projection
        self.dropout = nn.Dropout(cfg.resid_dropout_p)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.fc2(self.act(self.fc1(x))))  # (B, T, I) -> (B, T, C)


class Block(nn.Module):
    """Self-attention and MLP, each with a residual connection and a LayerNorm (pre or post)."""

    def __init__(self, cfg: ModelConfig, *, causal: bool) -> None:
        super().__init__()
        self.causal = causal
        self.pre_norm = cfg.norm == "pre"
        self.attn = MultiHeadAttention(
            cfg.hidden_size,
            cfg.num_heads,
            num_kv_heads=cfg.num_kv_heads,
            qkv_bias=cfg.qkv_bias,
            attn_dropout=cfg.attn_dropout_p,
            proj_dropout=cfg.resid_dropout_p,
            scale=cfg.attention_scale,
            qk_norm=cfg.qk_norm,
        )
        self.attn_norm = nn.LayerNorm(cfg.hidden_size, cfg.layer_norm_eps)
        self.mlp = MLP(cfg)
        self.mlp_norm = nn.LayerNorm(cfg.hidden_size, cfg.layer_norm_eps)

    def forward(
        self, x: Tensor, *, need_weights: bool = False, **attention: Any
    ) -> tuple[Tensor, Tensor | None]:
        """[B, T, C] -> ([B, T, C], attention probabilities [B, H, T, T_k] or None); the
        keywords ``attention`` go to ``MultiHeadAttention.forward``."""
        attn_in = self.attn_norm(x) if self.pre_norm else x
        attended = self.attn(attn_in, causal=self.causal, need_weights=need_weights, **attention)
        attended, probs = attended if need_weights else (attended, None)  # (B, T, C)
        if self.pre_norm:
            x = x + attended
            x = x + self.mlp(self.mlp_norm(x))
        else:
            x = self.attn_norm(x + attended)
            x = self.mlp_norm(x + self.mlp(x))
        return x, probs  # (B, T, C)


class MLMHead(nn.Module):
    """BERT's masked-LM head: dense + the activation + LayerNorm, then the vocabulary
    projection (its weight tied to the token embeddings when ``tie_embeddings``), whose input
    μP divides by the width multiplier; its logits soft-capped under ``logit_softcap``."""

    def __init__(self, cfg: ModelConfig, token_embedding: nn.Embedding) -> None:
        super().__init__()
        self.readout_scale = cfg.readout_multiplier
        self.cap = cfg.logit_softcap
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.act = activation(cfg)
        self.norm = nn.LayerNorm(cfg.hidden_size, cfg.layer_norm_eps)
        self.proj = nn.Linear(cfg.hidden_size, cfg.vocab_size)
        if cfg.tie_embeddings:
            self.proj.weight = token_embedding.weight

    def forward(self, x: Tensor) -> Tensor:
        x = self.norm(self.act(self.dense(x)))  # (B, T, C)
        if self.readout_scale != 1.0:
            x = x * self.readout_scale
        return soft_cap(self.proj(x), self.cap)  # (B, T, V)


def soft_cap(logits: Tensor, cap: float | None) -> Tensor:
    """cap * tanh(logits / cap): about the logits where they are small, never past ±cap
    (Gemma 2's final-logit soft-capping); the logits as they are for ``cap=None``."""
    return logits if cap is None else cap * torch.tanh(logits / cap)


@contextmanager
def eval_mode(module: nn.Module) -> Iterator[None]:
    """Run in eval mode (no dropout) and restore the caller's training flag afterwards."""
    was_training = module.training
    module.eval()
    try:
        yield
    finally:
        module.train(was_training)


class TransformerBase(nn.Module):
    """What the encoder and decoder share: embeddings, blocks, init, counts, the trunk pass."""

    arch: str
    causal: bool

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        if cfg.arch != self.arch:
            raise ValueError(
                f"{type(self).__name__} needs arch={self.arch!r}, got arch={cfg.arch!r}; "
                "use build_model(cfg) to pick the class from the config"
            )
        if cfg.vocab_size is None:
            raise ValueError(
                "vocab_size is None; fill it in from the tokenizer (its vocabulary size) "
                "before building the model"
            )
        self.config = cfg
        self.embeddings = Embeddings(cfg)
        self.blocks = nn.ModuleList(Block(cfg, causal=self.causal) for _ in range(cfg.num_layers))
        # One table for every layer: they rotate by the same positions.
        self.rotary = (
            RotaryEmbedding(cfg.hidden_size // cfg.num_heads, cfg.max_seq_len)
            if cfg.position == "rope"
            else None
        )
        self.final_norm = (
            nn.LayerNorm(cfg.hidden_size, cfg.layer_norm_eps) if cfg.norm == "pre" else None
        )
        # U-net skips: one weight per pair of layers (i, L - 1 - i), starting at 1.
        self.skip_weights = (
            nn.Parameter(torch.ones(cfg.num_layers // 2)) if cfg.unet_skips else None
        )
        kv_width = (cfg.num_kv_heads or cfg.num_heads) * (cfg.hidden_size // cfg.num_heads)
        self.value_embeddings = nn.ModuleList(
            nn.Embedding(cfg.vocab_size, kv_width) for _ in range(cfg.value_embeddings)
        )

    def hidden_matrices(self) -> list[nn.Parameter]:
        """The weights whose two dimensions both grow with the width: the ones μP initialises
        with std / sqrt(m) and whose Adam learning rate it divides by m (m the width
        multiplier). The embeddings and the readout have one dimension fixed by the vocabulary
        or the context, so they keep their initialisation and learning rate."""
        return [
            linear.weight
            for block in self.blocks
            for linear in (block.attn.qkv_proj, block.attn.out_proj, block.mlp.fc1, block.mlp.fc2)
        ]

    def readout(self) -> nn.Linear:
        """The vocabulary projection."""
        raise NotImplementedError

    def _init_weights(self, *, scale_residual: bool) -> None:
        """GPT-2 / BERT init: N(0, 0.02) weights, zero biases, LayerNorm ones / zeros; with
        ``scale_residual`` (GPT-2) the 2 L projections summed into the residual stream get
        std 0.02 / sqrt(2 L), so its variance stays O(1). Under μP the hidden matrices' std is
        divided by sqrt(m), and ``mup_zero_init`` zeroes the queries and an untied readout
        (mup's recommendation: the attention starts uniform, the logits at zero).
        ``zero_init_residual`` zeroes the projections that write into the residual stream, as
        modded-nanogpt does, so that every block starts as the identity."""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, (nn.Linear, nn.LayerNorm)) and module.bias is not None:
                nn.init.zeros_(module.bias)
            if isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
        if scale_residual:
            std = 0.02 / math.sqrt(2 * self.config.num_layers)
            for block in self.blocks:
                nn.init.normal_(block.attn.out_proj.weight, mean=0.0, std=std)
                nn.init.normal_(block.mlp.fc2.weight, mean=0.0, std=std)
        cfg = self.config
        if cfg.zero_init_residual:  # each block starts as the identity
            for block in self.blocks:
                nn.init.zeros_(block.attn.out_proj.weight)
                nn.init.zeros_(block.mlp.fc2.weight)
        if cfg.parametrization != "mup":
            return
        with torch.no_grad():
            if cfg.width_multiplier != 1.0:
                for weight in self.hidden_matrices():
                    weight.mul_(1 / math.sqrt(cfg.width_multiplier))
            if cfg.mup_zero_init:
                for block in self.blocks:
                    block.attn.qkv_proj.weight[: cfg.hidden_size].zero_()  # the query rows
                if not cfg.tie_embeddings:
                    self.readout().weight.zero_()

    def _trunk(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None,
        *,
        token_type_ids: Tensor | None = None,
        output_attentions: bool = False,
        kv_caches: list[KVCache] | None = None,
        document_ids: Tensor | None = None,
        head_mask: Tensor | None = None,
    ) -> tuple[Tensor, tuple[Tensor, ...] | None]:
        """Embeddings and blocks (and the final norm when pre-LN): [B, T] -> [B, T, C]."""
        past_length = kv_caches[0].length if kv_caches else 0
        self._check_inputs(input_ids, attention_mask, past_length)
        if head_mask is not None:
            cfg = self.config
            check_head_gate(
                "head_mask", head_mask, num_layers=cfg.num_layers, num_heads=cfg.num_heads
            )
        mask = None
        if document_ids is None:
            positions = position_ids(
                attention_mask, input_ids.shape[1], past_length, input_ids.device
            )  # (B|1, T)
        else:
            check_document_ids(document_ids, input_ids, attention_mask, kv_caches)
            mask, positions = document_layout(document_ids)  # (B, 1, T, T), (B, T)
        x = self.embeddings(input_ids, positions, token_type_ids)  # (B, T, C)
        rotary = None if self.rotary is None else self.rotary(positions)  # 2 x (B|1, T, D/2)
        attentions = []
        num_layers, skipped = len(self.blocks), []
        for i, block in enumerate(self.blocks):
            if self.skip_weights is not None and i >= num_layers - len(self.skip_weights):
                x = x + self.skip_weights[num_layers - 1 - i] * skipped.pop()  # layer L-1-i's
            cache = kv_caches[i] if kv_caches else None
            x, probs = block(
                x,
                attention_mask=attention_mask,
                need_weights=output_attentions,
                kv_cache=cache,
                rotary=rotary,
                mask=mask,
                head_gate=None if head_mask is None else head_mask[i],
                extra_values=self._value_embedding(i, input_ids),
            )
            if self.skip_weights is not None and i < len(self.skip_weights):
                skipped.append(x)  # (B, T, C)
            attentions.append(probs)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x, tuple(attentions) if output_attentions else None  # (B, T, C)

    def _value_embedding(self, layer: int, input_ids: Tensor) -> Tensor | None:
        """The values layer ``layer`` adds, [B, T, H_kv * D]: table i serves layers i and
        L - n + i of n tables (modded-nanogpt's layout), the others none."""
        n, num_layers = len(self.value_embeddings), len(self.blocks)
        table = layer if layer < n else layer - (num_layers - n)
        return self.value_embeddings[table](input_ids) if 0 <= table < n else None

    def _check_inputs(
        self, input_ids: Tensor, attention_mask: Tensor | None, past_length: int
    ) -> None:
        if input_ids.dim() != 2:
            raise ValueError(
                f"input_ids has shape {tuple(input_ids.shape)}, expected [batch, length]"
            )
        total = past_length + input_ids.shape[1]
        if total > self.config.max_seq_len:
            raise ValueError(
                f"sequence length {total} exceeds max_seq_len={self.config.max_seq_len}; crop "
                "the input to its last max_seq_len tokens or raise max_seq_len"
            )
        expected = (input_ids.shape[0], total)
        if attention_mask is not None and tuple(attention_mask.shape) != expected:
            raise ValueError(
                f"attention_mask has shape {tuple(attention_mask.shape)}, expected "
                f"[batch, length] = {list(expected)} (with a KV cache it covers cached tokens)"
            )

    def hidden_states(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        *,
        token_type_ids: Tensor | None = None,
    ) -> Tensor:
        """The last layer's states [B, T, C], before any head: what a classifier pools."""
        hidden, _ = self._trunk(input_ids, attention_mask, token_type_ids=token_type_ids)
        return hidden  # (B, T, C)

    def num_parameters(self, exclude_embeddings: bool = False) -> int:
        """Number of parameters, tied matrices counted once. ``exclude_embeddings`` leaves out
        the tables that are only looked up (the token table counts when tied to the output
        projection, a real matmul): the N of the 6N FLOP estimate, as in nanoGPT."""
        excluded: set[int] = set()
        if exclude_embeddings:
            emb = self.embeddings
            lookups = [emb.position, emb.token_type, self.value_embeddings]
            if not self.config.tie_embeddings:
                lookups.append(emb.token)
            excluded = {id(p) for m in lookups if m is not None for p in m.parameters()}
        return sum(p.numel() for p in self.parameters() if id(p) not in excluded)

    def flops_per_token(self, seq_len: int | None = None) -> int:
        """Training FLOPs per token, for MFU: 6 N (a multiply-add per weight forward, two
        backward) + 12 L C T (Q K^T and the sum over V, 2 C T each forward, x3 with backward;
        the causal half is computed too). PaLM's appendix B, nanoGPT's ``estimate_mfu``."""
        cfg = self.config
        context = cfg.max_seq_len if seq_len is None else seq_len
        non_embedding = self.num_parameters(exclude_embeddings=True)
        return 6 * non_embedding + 12 * cfg.num_layers * cfg.hidden_size * context


class Encoder(TransformerBase):
    """BERT-style bidirectional encoder with a masked-LM head."""

    arch = "encoder"
    causal = False

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.mlm_head = MLMHead(cfg, self.embeddings.token)
        self._init_weights(scale_residual=False)

    def hidden_matrices(self) -> list[nn.Parameter]:
        return [*super().hidden_matrices(), self.mlm_head.dense.weight]

    def readout(self) -> nn.Linear:
        return self.mlm_head.proj

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        *,
        token_type_ids: Tensor | None = None,
        output_attentions: bool = False,
        head_mask: Tensor | None = None,
    ) -> Tensor | ModelOutput:
        """input_ids [B, T] -> logits [B, T, V], or ModelOutput when output_attentions.
        head_mask: [L, H] floats, a multiplier on each head's output (0 removes the head)."""
        hidden, attentions = self._trunk(
            input_ids,
            attention_mask,
            token_type_ids=token_type_ids,
            output_attentions=output_attentions,
            head_mask=head_mask,
        )
        logits = self.mlm_head(hidden)  # (B, T, V)
        return ModelOutput(logits, attentions) if output_attentions else logits

    @torch.inference_mode()
    def fill_mask(
        self,
        input_ids: Tensor,
        mask_token_id: int,
        attention_mask: Tensor | None = None,
        top_k: int = 5,
        *,
        token_type_ids: Tensor | None = None,
    ) -> list[list[MaskPrediction]]:
        """Top-k predictions at every ``mask_token_id`` position (padding excluded), one list
        per batch row ordered by position; ``top_k`` above the vocabulary size is clamped."""
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"top_k={top_k!r} must be a positive int")
        with eval_mode(self):
            logits = self(input_ids, attention_mask, token_type_ids=token_type_ids)  # (B, T, V)
        is_mask = input_ids == mask_token_id  # (B, T)
        if attention_mask is not None:
            is_mask &= attention_mask.bool()
        probs = torch.softmax(logits[is_mask].float(), dim=-1)  # (M, V) over M masked slots
        top = probs.topk(min(top_k, self.config.vocab_size), dim=-1)  # (M, k) each
        rows, cols = is_mask.nonzero(as_tuple=True)  # row-major: sorted by (row, position)
        predictions: list[list[MaskPrediction]] = [[] for _ in range(input_ids.shape[0])]
        for row, col, ids, p in zip(
            rows.tolist(), cols.tolist(), top.indices.tolist(), top.values.tolist(), strict=True
        ):
            predictions[row].append(MaskPrediction(col, ids, p))
        return predictions


class Decoder(TransformerBase):
    """GPT-style causal decoder with a linear LM head (tied to the token embeddings)."""

    arch = "decoder"
    causal = True

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.embeddings.token.weight
        # μP's readout multiplier (1 / m), on the head's input as mup's MuReadout has it.
        self.readout_scale = cfg.readout_multiplier
        self._init_weights(scale_residual=True)

    def readout(self) -> nn.Linear:
        return self.lm_head

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        *,
        output_attentions: bool = False,
        kv_caches: list[KVCache] | None = None,
        document_ids: Tensor | None = None,
        head_mask: Tensor | None = None,
    ) -> Tensor | ModelOutput:
        """input_ids [B, T] -> logits [B, T, V], or ModelOutput when output_attentions.

        attention_mask: with ``kv_caches`` (``init_caches``) it covers the cached tokens too.
        document_ids: [B, T], a token attends only to earlier tokens of its document and
        positions restart at each (``document_layout``); padding is a document of its own.
        head_mask: [L, H] floats, a multiplier on each head's output (0 removes the head).
        """
        hidden, attentions = self._trunk(
            input_ids,
            attention_mask,
            output_attentions=output_attentions,
            kv_caches=kv_caches,
            document_ids=document_ids,
            head_mask=head_mask,
        )
        if self.readout_scale != 1.0:
            hidden = hidden * self.readout_scale
        logits = soft_cap(self.lm_head(hidden), self.config.logit_softcap)  # (B, T, V)
        return ModelOutput(logits, attentions) if output_attentions else logits

    def init_caches(self, batch_size: int) -> list[KVCache]:
        """One empty KV cache per layer, each holding up to ``max_seq_len`` positions."""
        return [b.attn.init_cache(batch_size, self.config.max_seq_len) for b in self.blocks]

    @torch.inference_mode()
    def generate(
        self,
        input_ids: Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        eos_token_id: int | None = None,
        use_cache: bool = True,
        attention_mask: Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Extend each (left-padded) prompt by up to ``max_new_tokens`` tokens: [B, T_prompt +
        new]. ``temperature=0`` is greedy; ``top_k`` None/0 disables top-k; ``top_p`` keeps the
        smallest set of tokens whose probability reaches it. A row that emitted
        ``eos_token_id`` is filled with ``config.pad_token_id`` (or EOS); all finished: stop.

        The model sees the last ``max_seq_len`` tokens. The KV cache holds absolute positions,
        which shift once the context slides, so from there each step re-reads the last window
        without the cache: identical to ``use_cache=False``, only slower.
        """
        check_sampling_args(max_new_tokens, temperature, top_k, top_p)
        cfg = self.config
        if eos_token_id is not None and not 0 <= eos_token_id < cfg.vocab_size:
            raise ValueError(
                f"eos_token_id={eos_token_id} is outside the vocabulary [0, {cfg.vocab_size})"
            )
        _check_left_padded(input_ids, attention_mask)
        window = cfg.max_seq_len
        if input_ids.shape[1] > window:
            warnings.warn(
                f"prompt of {input_ids.shape[1]} tokens is longer than max_seq_len={window}; "
                f"the model sees only its last {window} tokens",
                stacklevel=2,
            )
        fill_id = cfg.pad_token_id if cfg.pad_token_id is not None else eos_token_id
        finished = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        ids, mask = input_ids, attention_mask  # (B, T_prompt + step) each
        caches = self.init_caches(ids.shape[0]) if use_cache else None
        cached_length = 0
        with eval_mode(self):
            for _ in range(max_new_tokens):
                if caches is not None and ids.shape[1] > window:
                    caches = None  # the window slides from here on: see the docstring
                if caches is None:
                    context = ids[:, -window:]  # (B, <= window)
                    context_mask = None if mask is None else mask[:, -window:]
                else:
                    context, context_mask = ids[:, cached_length:], mask  # only uncached tokens
                    cached_length = ids.shape[1]
                logits = self(context, context_mask, kv_caches=caches)[:, -1]  # (B, V)
                next_id = sample_next_token(logits, temperature, top_k, top_p, generator)  # (B,)
                if eos_token_id is not None:
                    next_id = next_id.masked_fill(finished, fill_id)
                    finished |= next_id == eos_token_id
                ids = torch.cat([ids, next_id[:, None]], dim=1)
                if mask is not None:
                    mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
                if finished.all():
                    break
        return ids  # (B, T_prompt + new)


def build_model(cfg: ModelConfig) -> Encoder | Decoder:
    """The model class named by ``cfg.arch``."""
    return Encoder(cfg) if cfg.arch == "encoder" else Decoder(cfg)


def _check_left_padded(input_ids: Tensor, attention_mask: Tensor | None) -> None:
    if input_ids.dim() != 2 or input_ids.shape[1] == 0:
        raise ValueError(
            f"input_ids has shape {tuple(input_ids.shape)}; generate needs [batch, length >= 1]"
        )
    if attention_mask is None:
        return
    if tuple(attention_mask.shape) != tuple(input_ids.shape):
        raise ValueError(
            f"attention_mask has shape {tuple(attention_mask.shape)}, expected the shape of "
            f"input_ids {tuple(input_ids.shape)}"
        )
    real = attention_mask.bool()  # (B, T)
    if not real[:, -1].all() or (real[:, :-1] & ~real[:, 1:]).any():
        raise ValueError(
            "generate needs left-padded prompts (padding before the prompt, the last token "
            "real): attention_mask has a 0 after a 1; pad on the left (padding_side='left')"
        )
