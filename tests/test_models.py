"""Tests of models/config.py and models/transformer.py: tiny CPU models, seeded, a few seconds."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from models.config import ModelConfig
from models.transformer import Decoder, Encoder, MaskPrediction, ModelOutput, build_model

VOCAB = 37


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


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


# The position and key/value-head options that change the attention's inputs: every cache,
# padding and generation test runs with each.
VARIANTS = [
    pytest.param({}, id="learned"),
    pytest.param({"position": "rope"}, id="rope"),
    pytest.param({"position": "rope", "num_kv_heads": 2}, id="rope_gqa"),
    pytest.param({"num_kv_heads": 1}, id="mqa"),
]


# ---------------------------------------------------------------------------------------------
# Config


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


# ---------------------------------------------------------------------------------------------
# Structure: shapes, tying, parameter counts, init


def expected_parameters(cfg: ModelConfig, exclude_embeddings: bool = False) -> int:
    """Hand count of the architecture described in models/transformer.py."""
    C, V, T, L = cfg.hidden_size, cfg.vocab_size, cfg.max_seq_len, cfg.num_layers
    mlp_width = cfg.mlp_size
    layer_norm = 2 * C
    token = V * C
    position = T * C if cfg.position == "learned" else 0  # sinusoidal and rope: buffers
    token_type = cfg.type_vocab_size * C
    embeddings = token + position + token_type + (layer_norm if cfg.norm == "post" else 0)
    qkv = C + 2 * (cfg.num_kv_heads or cfg.num_heads) * (C // cfg.num_heads)  # q, k, v widths
    attention = C * qkv + (qkv if cfg.qkv_bias else 0) + C * C + C  # qkv + out_proj
    mlp = C * mlp_width + mlp_width + mlp_width * C + C
    block = attention + mlp + 2 * layer_norm
    final_norm = layer_norm if cfg.norm == "pre" else 0
    untied_projection = 0 if cfg.tie_embeddings else V * C
    if cfg.arch == "decoder":
        head = untied_projection  # no bias
    else:
        head = C * C + C + layer_norm + V + untied_projection  # dense, norm, own vocab bias
    total = embeddings + L * block + final_norm + head
    if exclude_embeddings:
        total -= position + token_type + (0 if cfg.tie_embeddings else token)
    return total


COUNT_CASES = [
    dict(arch="decoder"),
    dict(arch="decoder", norm="post", tie_embeddings=False, qkv_bias=False, position="sinusoidal"),
    dict(arch="encoder", type_vocab_size=2),
    dict(
        arch="encoder",
        norm="pre",
        tie_embeddings=False,
        position="sinusoidal",
        intermediate_size=48,
    ),
    dict(arch="decoder", position="rope", num_kv_heads=2),
    dict(arch="encoder", position="rope", num_kv_heads=1),
]


@pytest.mark.parametrize("overrides", COUNT_CASES)
def test_parameter_count_matches_hand_count(overrides: dict[str, Any]) -> None:
    cfg = tiny_config(**overrides)
    model = build_model(cfg)
    assert model.num_parameters() == expected_parameters(cfg)
    assert model.num_parameters(exclude_embeddings=True) == expected_parameters(cfg, True)
    n = expected_parameters(cfg, True)
    context = cfg.max_seq_len
    assert model.flops_per_token() == 6 * n + 12 * cfg.num_layers * cfg.hidden_size * context
    assert model.flops_per_token(seq_len=4) == 6 * n + 12 * cfg.num_layers * cfg.hidden_size * 4


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_weight_tying_shares_storage(arch: str) -> None:
    tied, untied = tiny_model(arch), tiny_model(arch, tie_embeddings=False)
    head = (lambda m: m.lm_head) if arch == "decoder" else (lambda m: m.mlm_head.proj)
    token = tied.embeddings.token.weight
    assert head(tied).weight.data_ptr() == token.data_ptr()
    assert head(untied).weight.data_ptr() != untied.embeddings.token.weight.data_ptr()
    # One update reaches both uses of the shared matrix.
    with torch.no_grad():
        token[3].fill_(1.0)
    assert torch.equal(head(tied).weight[3], torch.ones(32))


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_shapes(arch: str) -> None:
    model = tiny_model(arch)
    ids = torch.randint(0, VOCAB, (3, 11))
    logits = model(ids)
    assert isinstance(logits, torch.Tensor) and logits.shape == (3, 11, VOCAB)
    with pytest.raises(ValueError, match="exceeds max_seq_len=16; crop"):
        model(torch.randint(0, VOCAB, (1, 17)))
    with pytest.raises(ValueError, match=r"attention_mask has shape \(3, 10\)"):
        model(ids, torch.ones(3, 10, dtype=torch.long))


def test_token_type_ids() -> None:
    model = tiny_model("encoder", type_vocab_size=2)
    ids = torch.randint(0, VOCAB, (2, 6))
    zeros = torch.zeros_like(ids)
    torch.testing.assert_close(model(ids), model(ids, token_type_ids=zeros))
    assert not torch.allclose(model(ids), model(ids, token_type_ids=torch.ones_like(ids)))
    with pytest.raises(ValueError, match="type_vocab_size=0"):
        tiny_model("encoder")(ids, token_type_ids=zeros)


def test_init_follows_gpt2() -> None:
    model = tiny_model("decoder", hidden_size=64, num_layers=4)
    block = model.blocks[0]
    residual_std = 0.02 / math.sqrt(2 * 4)
    assert block.attn.out_proj.weight.std().item() == pytest.approx(residual_std, rel=0.1)
    assert block.mlp.fc2.weight.std().item() == pytest.approx(residual_std, rel=0.1)
    assert block.mlp.fc1.weight.std().item() == pytest.approx(0.02, rel=0.1)
    assert model.embeddings.token.weight.std().item() == pytest.approx(0.02, rel=0.1)
    assert torch.count_nonzero(block.attn.qkv_proj.bias) == 0
    assert torch.equal(block.attn_norm.weight, torch.ones(64))
    # BERT does not scale the residual projections.
    encoder = tiny_model("encoder", hidden_size=64, num_layers=4)
    assert encoder.blocks[0].mlp.fc2.weight.std().item() == pytest.approx(0.02, rel=0.1)


# ---------------------------------------------------------------------------------------------
# Masks: causality and padding


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("output_attentions", [False, True])  # SDPA path and plain path
def test_decoder_future_tokens_never_change_the_past(
    output_attentions: bool, variant: dict[str, Any]
) -> None:
    model = tiny_model("decoder", **variant)
    ids = torch.randint(0, VOCAB, (2, 12))

    def logits_of(x: torch.Tensor) -> torch.Tensor:
        out = model(x, output_attentions=output_attentions)
        return out.logits if output_attentions else out

    base = logits_of(ids)
    for t in range(11):
        changed = ids.clone()
        changed[:, t + 1 :] = (changed[:, t + 1 :] + 1) % VOCAB
        logits = logits_of(changed)
        torch.testing.assert_close(logits[:, : t + 1], base[:, : t + 1], rtol=0, atol=1e-5)
        assert not torch.allclose(logits[:, t + 1], base[:, t + 1], atol=1e-4)  # can fail


@pytest.mark.parametrize(
    "overrides",
    [
        dict(),
        dict(norm="pre", position="sinusoidal", type_vocab_size=2),
        dict(position="rope", num_kv_heads=2),
    ],
)
def test_encoder_padding_does_not_change_real_tokens(overrides: dict[str, Any]) -> None:
    model = tiny_model("encoder", **overrides)
    ids = torch.randint(0, VOCAB, (1, 5))
    alone = model(ids, torch.ones(1, 5, dtype=torch.long))
    padded = torch.cat([ids, torch.randint(0, VOCAB, (1, 4))], dim=1)  # junk in the padding
    mask = torch.tensor([[1] * 5 + [0] * 4])
    torch.testing.assert_close(model(padded, mask)[:, :5], alone, rtol=0, atol=1e-5)
    # Without the mask the junk is attended to, so the check above can fail.
    assert not torch.allclose(model(padded)[:, :5], alone, atol=1e-3)


@pytest.mark.parametrize("variant", VARIANTS)
def test_decoder_left_padding_gets_unpadded_positions(variant: dict[str, Any]) -> None:
    model = tiny_model("decoder", **variant)
    ids = torch.randint(0, VOCAB, (1, 6))
    padded = torch.cat([torch.randint(0, VOCAB, (1, 3)), ids], dim=1)
    mask = torch.tensor([[0, 0, 0] + [1] * 6])
    torch.testing.assert_close(model(padded, mask)[:, 3:], model(ids), rtol=0, atol=1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("padding", [False, True])
@pytest.mark.parametrize("chunks", [[1] * 9, [4, 3, 2]], ids=["tokens", "chunks"])
def test_kv_cache_chunks_match_the_full_pass(
    chunks: list[int], padding: bool, variant: dict[str, Any]
) -> None:
    model = tiny_model("decoder", **variant)
    ids = torch.randint(0, VOCAB, (2, 9))
    mask = torch.tensor([[1] * 9, [0] * 3 + [1] * 6]) if padding else None  # left padding
    full = model(ids, mask)  # (B, T, V)
    caches = model.init_caches(2)
    pieces, start = [], 0
    for size in chunks:
        end = start + size
        step_mask = None if mask is None else mask[:, :end]  # covers the cached tokens too
        pieces.append(model(ids[:, start:end], step_mask, kv_caches=caches))
        start = end
    # The cache holds the key/value heads only.
    assert caches[0].keys.shape[1] == (variant.get("num_kv_heads") or 4)
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=0, atol=1e-5)


def test_checkpoint_without_num_kv_heads_loads_to_the_same_logits() -> None:
    """Configs saved before num_kv_heads existed lack the key: the default is multi-head."""
    model = tiny_model("decoder")
    old = model.config.to_dict()
    del old["num_kv_heads"]
    ids = torch.randint(0, VOCAB, (2, 9))
    for restored_config in (ModelConfig.from_dict(old), tiny_config(num_kv_heads=4)):
        restored = build_model(restored_config).eval()
        restored.load_state_dict(model.state_dict())
        torch.testing.assert_close(restored(ids), model(ids), rtol=0, atol=0)


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_output_attentions(arch: str) -> None:
    model = tiny_model(arch)
    ids = torch.randint(0, VOCAB, (2, 7))
    mask = torch.tensor([[1] * 7, [1] * 5 + [0] * 2]) if arch == "encoder" else None
    out = model(ids, mask, output_attentions=True)
    assert isinstance(out, ModelOutput)
    logits, attentions = out  # a NamedTuple unpacks too
    torch.testing.assert_close(logits, model(ids, mask), rtol=0, atol=1e-5)
    assert len(attentions) == 2
    for probs in attentions:
        assert probs.shape == (2, 4, 7, 7)
        torch.testing.assert_close(probs.sum(-1), torch.ones(2, 4, 7))
        if arch == "decoder":
            assert torch.count_nonzero(probs.triu(diagonal=1)) == 0
        else:
            assert torch.count_nonzero(probs[1, :, :, 5:]) == 0  # padded keys get nothing


# ---------------------------------------------------------------------------------------------
# Generation


def greedy_reference(model: Decoder, ids: torch.Tensor, steps: int) -> torch.Tensor:
    """The obvious loop: full forward over the last max_seq_len tokens, argmax."""
    window = model.config.max_seq_len
    with torch.no_grad():
        for _ in range(steps):
            next_id = model(ids[:, -window:])[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, next_id], dim=1)
    return ids


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("use_cache", [True, False])
def test_batched_left_padded_generation_equals_one_by_one(
    use_cache: bool, variant: dict[str, Any]
) -> None:
    model = tiny_model("decoder", **variant)
    prompts = [torch.randint(0, VOCAB, (n,)) for n in (3, 7, 5)]
    width = max(len(p) for p in prompts)
    batch = torch.zeros(3, width, dtype=torch.long)
    mask = torch.zeros(3, width, dtype=torch.long)
    for row, prompt in enumerate(prompts):
        batch[row, width - len(prompt) :] = prompt
        mask[row, width - len(prompt) :] = 1
    out = model.generate(batch, 8, temperature=0, attention_mask=mask, use_cache=use_cache)
    assert out.shape == (3, width + 8)
    for row, prompt in enumerate(prompts):
        alone = model.generate(prompt[None], 8, temperature=0, use_cache=use_cache)
        assert torch.equal(out[row, width:], alone[0, len(prompt) :])
        assert torch.equal(alone, greedy_reference(model, prompt[None], 8))


@pytest.mark.parametrize(
    "sampling",
    [
        dict(temperature=0.0),
        dict(temperature=1.0),
        dict(temperature=0.8, top_k=5),
        dict(temperature=1.0, top_p=0.9),
        dict(temperature=1.5, top_k=100, top_p=0.5),
    ],
)
@pytest.mark.parametrize("variant", VARIANTS[1:])
def test_cached_and_uncached_generation_agree(
    sampling: dict[str, Any], variant: dict[str, Any]
) -> None:
    model = tiny_model("decoder", **variant)
    prompt = torch.randint(0, VOCAB, (2, 4))
    outs = [
        model.generate(
            prompt, 10, use_cache=use_cache, generator=torch.Generator().manual_seed(7), **sampling
        )
        for use_cache in (True, False)
    ]
    assert torch.equal(outs[0], outs[1])
    assert torch.equal(outs[0][:, :4], prompt)


@pytest.mark.parametrize("use_cache", [True, False])
def test_generation_runs_past_max_seq_len(use_cache: bool) -> None:
    model = tiny_model("decoder")  # max_seq_len=16
    prompt = torch.randint(0, VOCAB, (2, 5))
    out = model.generate(prompt, 30, temperature=0, use_cache=use_cache)
    assert out.shape == (2, 35)
    assert torch.equal(out, greedy_reference(model, prompt, 30))


def test_long_prompt_is_cropped_with_a_warning() -> None:
    model = tiny_model("decoder")
    prompt = torch.randint(0, VOCAB, (1, 20))
    with pytest.warns(UserWarning, match="longer than max_seq_len=16; the model sees only"):
        cached = model.generate(prompt, 4, temperature=0)
    with pytest.warns(UserWarning):
        uncached = model.generate(prompt, 4, temperature=0, use_cache=False)
    assert torch.equal(cached[:, :20], prompt)  # the whole prompt comes back
    assert torch.equal(cached, uncached)
    assert torch.equal(cached, greedy_reference(model, prompt, 4))


def test_generation_pads_after_eos_and_restores_training_mode() -> None:
    model = build_model(tiny_config("decoder", pad_token_id=0)).train()
    prompt = torch.randint(1, VOCAB, (2, 4))
    free = model.generate(prompt, 6, temperature=0)
    assert model.training  # restored
    eos = free[0, 5].item()  # row 0's second new token
    out = model.generate(prompt, 6, temperature=0, eos_token_id=eos)
    first_eos = (out[0, 4:] == eos).nonzero()[0].item() + 4
    assert torch.equal(out[0, : first_eos + 1], free[0, : first_eos + 1])
    assert (out[0, first_eos + 1 :] == 0).all()
    assert not out.requires_grad


def test_generation_stops_when_every_row_finished() -> None:
    model = tiny_model("decoder")
    prompt = torch.randint(0, VOCAB, (1, 4))
    eos = model.generate(prompt, 1, temperature=0)[0, -1].item()
    assert model.generate(prompt, 10, temperature=0, eos_token_id=eos).shape == (1, 5)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(temperature=-1.0), "temperature=-1.0 must be a finite number >= 0"),
        (dict(top_k=-1), "top_k=-1 must be None or 0"),
        (dict(top_p=0.0), r"top_p=0.0 must be in \(0, 1\]"),
        (dict(top_p=1.5), r"top_p=1.5 must be in \(0, 1\]"),
        (dict(max_new_tokens=-2), "max_new_tokens=-2 must be an int >= 0"),
        (dict(eos_token_id=VOCAB), "eos_token_id=37 is outside the vocabulary"),
        (dict(attention_mask=torch.tensor([[1, 1, 0]])), "needs left-padded prompts"),
    ],
)
def test_generation_rejects_invalid_arguments(kwargs: dict[str, Any], match: str) -> None:
    model = tiny_model("decoder")
    kwargs = dict(max_new_tokens=3) | kwargs
    with pytest.raises(ValueError, match=match):
        model.generate(torch.randint(0, VOCAB, (1, 3)), **kwargs)


def test_top_k_one_and_tiny_top_p_are_greedy() -> None:
    model = tiny_model("decoder")
    prompt = torch.randint(0, VOCAB, (2, 4))
    greedy = model.generate(prompt, 6, temperature=0)
    assert torch.equal(model.generate(prompt, 6, top_k=1), greedy)
    assert torch.equal(model.generate(prompt, 6, top_p=1e-6), greedy)


# ---------------------------------------------------------------------------------------------
# Fill-mask


def test_fill_mask() -> None:
    mask_id = VOCAB - 1
    model = tiny_model("encoder").train()
    ids = torch.randint(0, mask_id, (2, 8))
    ids[0, [2, 5]] = mask_id
    ids[1, 1] = mask_id
    ids[1, 7] = mask_id  # in the padding: ignored
    attention_mask = torch.tensor([[1] * 8, [1] * 6 + [0] * 2])
    result = model.fill_mask(ids, mask_id, attention_mask, top_k=4)
    assert model.training  # restored
    assert [[p.position for p in row] for row in result] == [[2, 5], [1]]
    with torch.no_grad():
        model.eval()
        expected = model(ids, attention_mask).softmax(-1)
    for row, predictions in enumerate(result):
        for pred in predictions:
            assert isinstance(pred, MaskPrediction)
            assert len(pred.token_ids) == len(pred.probs) == 4
            assert pred.probs == sorted(pred.probs, reverse=True)
            assert sum(pred.probs) <= 1.0 + 1e-6
            assert pred.token_ids[0] == expected[row, pred.position].argmax().item()
            assert pred.probs[0] == pytest.approx(expected[row, pred.position].max().item())
    everything = model.fill_mask(ids, mask_id, attention_mask, top_k=1000)  # clamped to V
    assert sum(everything[0][0].probs) == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ValueError, match="top_k=0 must be a positive int"):
        model.fill_mask(ids, mask_id, top_k=0)


# ---------------------------------------------------------------------------------------------
# Learning


def train(model: Encoder | Decoder, batches: Any, steps: int, lr: float = 3e-3) -> float:
    """Adam on cross-entropy (-100 = no target); returns the last loss, stopping at 0.05."""
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss = torch.tensor(math.inf)
    for _ in range(steps):
        inputs, labels = batches()
        loss = F.cross_entropy(model(inputs).flatten(0, 1), labels.flatten(), ignore_index=-100)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss.item() < 0.05:
            break
    model.eval()
    return loss.item()


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_overfits_one_batch(arch: str) -> None:
    model = tiny_model(arch)
    ids = torch.randint(0, VOCAB - 1, (4, 16))
    if arch == "decoder":
        inputs, labels = ids[:, :-1], ids[:, 1:]
    else:
        masked = torch.rand(ids.shape) < 0.15
        inputs = ids.masked_fill(masked, VOCAB - 1)
        labels = ids  # reconstruct every token, masked ones included
    assert train(model, lambda: (inputs, labels), steps=300) < 0.05


def right_context_batch(n: int, length: int = 8, symbols: int = 8) -> tuple[torch.Tensor, ...]:
    """Random symbols where the token at a random position p equals the token after it.

    Returns (inputs with position p replaced by MASK = ``symbols``, p, the target x[p]).
    """
    x = torch.randint(0, symbols, (n, length))
    p = torch.randint(1, length - 1, (n,))
    rows = torch.arange(n)
    x[rows, p] = x[rows, p + 1]
    targets = x[rows, p]
    inputs = x.clone()
    inputs[rows, p] = symbols
    return inputs, p, targets


def test_encoder_uses_right_context_the_decoder_cannot_see() -> None:
    """x[p] is a copy of x[p + 1]: the encoder sees it, the decoder (predicting x[p] from
    x[< p]) can only guess among 8 symbols."""
    rows = torch.arange(64)

    def labels_at(positions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        labels = torch.full((64, 8), -100)
        labels[rows, positions] = targets
        return labels

    def encoder_batch() -> tuple[torch.Tensor, torch.Tensor]:
        inputs, p, targets = right_context_batch(64)
        return inputs, labels_at(p, targets)

    def decoder_batch() -> tuple[torch.Tensor, torch.Tensor]:
        inputs, p, targets = right_context_batch(64)
        return inputs, labels_at(p - 1, targets)  # the logits at p - 1 predict token p

    cfg = dict(vocab_size=9, max_seq_len=8)
    encoder, decoder = tiny_model("encoder", **cfg), tiny_model("decoder", **cfg)
    train(encoder, encoder_batch, steps=300)
    train(decoder, decoder_batch, steps=300)

    torch.manual_seed(1)  # held-out examples
    inputs, p, targets = right_context_batch(2000)
    eval_rows = torch.arange(2000)
    with torch.no_grad():
        encoder_accuracy = (encoder(inputs)[eval_rows, p].argmax(-1) == targets).float().mean()
        decoder_accuracy = (decoder(inputs)[eval_rows, p - 1].argmax(-1) == targets).float().mean()
    assert encoder_accuracy > 0.9
    assert decoder_accuracy < 0.25  # chance is 1/8
