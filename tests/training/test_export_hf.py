"""``mode=export export.format=hf``: folders that Hugging Face transformers loads on its own.

The network tests give every weight a large random value (not the N(0, 0.02) init, whose
near-uniform logits would hide a wrong mapping); the end-to-end tests export checkpoints of
tiny runs through ``run(cfg)`` and read them back with nothing from tinylm.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from data.tokenizer import special_tokens_of, tokenizer_from_json, train_tokenizer
from models.config import ModelConfig
from models.transformer import build_model
from tests.conftest import ROOT, compose_config, train_py
from train import run
from training.checkpoint import load_checkpoint

TOLERANCE = 1e-4  # fp32 logits
# Unknown characters (for the char and WordPiece vocabularies), newlines, tabs, runs of
# spaces, and special tokens written in the text.
AWKWARD_TEXT = "The class\nis  returned.\t☃ ünïcødé [MASK] of <|endoftext|>[SEP] end\n\n"
# What the README corpus offers the tokenizers to learn from.
TEXTS = [p for p in (ROOT / "README.md").read_text().split("\n\n") if p.strip()]


def _randomised(cfg: ModelConfig) -> torch.nn.Module:
    torch.manual_seed(0)
    model = build_model(cfg).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0.0, 0.5)
    return model


MUP_MULTIPLIERS = {
    "mup_base_width": 12,
    "mup_output_multiplier": 2.0,
    "mup_attention_multiplier": 0.5,
}
# (arch, tokenizer kind, non-default settings)
NETWORKS = [
    ("decoder", "bpe", {}),
    ("decoder", "char", {"position": "sinusoidal", "qkv_bias": False}),
    ("decoder", "bpe", {"tie_embeddings": False, "intermediate_size": 40, "layer_norm_eps": 1e-3}),
    ("decoder", "bpe", {"position": "rope"}),  # GPT-NeoX
    ("decoder", "char", {"position": "rope", "qkv_bias": False, "tie_embeddings": False}),
    ("encoder", "wordpiece", {}),
    ("encoder", "wordpiece", {"position": "sinusoidal", "qkv_bias": False, "type_vocab_size": 2}),
    ("encoder", "char", {"tie_embeddings": False, "layer_norm_eps": 1e-12}),
    # μP, its multipliers folded into the weights (width multiplier 32 / 12)
    ("decoder", "bpe", {"parametrization": "mup", "mup_base_width": 12}),
    ("decoder", "char", {"position": "rope", "parametrization": "mup", "mup_base_width": 12}),
    ("encoder", "wordpiece", {"parametrization": "mup", "mup_base_width": 12}),
    ("decoder", "char", {"parametrization": "mup", **MUP_MULTIPLIERS}),
    # ReLU² in the MLP, transformers' "relu2"
    ("decoder", "bpe", {"activation": "relu2"}),
    ("decoder", "char", {"position": "rope", "activation": "relu2"}),
    ("encoder", "wordpiece", {"activation": "relu2"}),
]


@pytest.mark.parametrize(("arch", "kind", "settings"), NETWORKS)
def test_transformers_model_computes_the_same_logits(arch, kind, settings) -> None:
    pytest.importorskip("transformers")
    from training.hf_export import to_hf_model

    tokenizer = train_tokenizer(kind, [TEXTS], 300)
    cfg = ModelConfig(
        vocab_size=tokenizer.get_vocab_size(),
        arch=arch,
        max_seq_len=24,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        norm="pre" if arch == "decoder" else "post",
        **settings,
    )
    model = _randomised(cfg)
    hf_model = to_hf_model(model, tokenizer)
    family = "GPTNeoX" if cfg.position == "rope" else "GPT2" if arch == "decoder" else "Bert"
    assert type(hf_model).__name__.startswith(family)
    ids = torch.randint(0, cfg.vocab_size, (2, 24), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, 15:] = 0  # right padding: BERT's position ids then agree with tinylm's
    with torch.no_grad():
        assert (hf_model(input_ids=ids).logits - model(ids)).abs().max() < TOLERANCE
        if arch == "encoder":
            hf = hf_model(input_ids=ids, attention_mask=mask).logits
            diff = (hf - model(ids, mask))[mask.bool()].abs().max()
            assert diff < TOLERANCE
            # The padding really matters to the real tokens' logits (the test can fail).
            assert (model(ids, mask) - model(ids))[mask.bool()].abs().max() > 1e-2
        if settings.get("type_vocab_size"):
            types = torch.zeros_like(ids)
            types[:, 10:] = 1
            hf = hf_model(input_ids=ids, token_type_ids=types).logits
            assert (hf - model(ids, token_type_ids=types)).abs().max() < TOLERANCE


@pytest.mark.parametrize(
    ("arch", "kind"),
    [("decoder", "bpe"), ("decoder", "char"), ("encoder", "wordpiece"), ("encoder", "char")],
)
def test_autotokenizer_encodes_as_tinylm(arch, kind, tmp_path) -> None:
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from training.hf_export import hf_tokenizer

    tokenizer = train_tokenizer(kind, [TEXTS], 300)
    cfg = ModelConfig(vocab_size=tokenizer.get_vocab_size(), arch=arch)
    hf_tokenizer(tokenizer, cfg).save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    ids = tokenizer.encode(AWKWARD_TEXT).ids
    specials = special_tokens_of(tokenizer)
    assert specials.mask_id in ids and specials.sep_id in ids
    if kind != "bpe":  # byte-level BPE knows every character
        assert tokenizer.token_to_id("[UNK]") in ids
    assert loaded(AWKWARD_TEXT, add_special_tokens=False)["input_ids"] == ids
    # The encoder's tokenizer frames its input as tinylm's training examples: [CLS] .. [SEP].
    framed = [specials.cls_id, *ids, specials.sep_id] if arch == "encoder" else ids
    assert loaded(AWKWARD_TEXT)["input_ids"] == framed
    assert loaded.mask_token == specials.mask and loaded.pad_token_id == specials.pad_id


# --------------------------------------------------------------- end to end, from checkpoints


@pytest.fixture(scope="module")
def exported(tiny_checkpoints: dict[str, Path]) -> dict[str, Path]:
    pytest.importorskip("transformers")
    folders = {}
    for arch, ckpt in tiny_checkpoints.items():
        args = ("mode=export", f"ckpt_path={ckpt}", "export.format=hf")
        result = run(compose_config(*args, f"output_dir={ckpt.parent.parent}"))
        folders[arch] = Path(result["hf"])
        assert folders[arch] == ckpt.with_name("last-hf")
    return folders


def test_export_folder_holds_transformers_files_only(exported) -> None:
    for folder in exported.values():
        names = {p.name for p in folder.iterdir()}
        assert {"config.json", "model.safetensors", "tokenizer.json"} <= names
        assert "tokenizer_config.json" in names
        assert not any(n.endswith((".bin", ".pt", ".ckpt")) for n in names)


def test_exported_decoder_logits_and_greedy_generation(tiny_checkpoints, exported) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    loaded = load_checkpoint(tiny_checkpoints["decoder"])
    hf_model = AutoModelForCausalLM.from_pretrained(exported["decoder"]).eval()
    assert type(hf_model).__name__ == "GPTNeoXForCausalLM"  # the default decoder: rope
    hf_tokenizer = AutoTokenizer.from_pretrained(exported["decoder"])
    prompt = "The class"
    ids = torch.tensor([tokenizer_from_json(loaded.tokenizer_json).encode(prompt).ids])
    assert hf_tokenizer(prompt, return_tensors="pt")["input_ids"].tolist() == ids.tolist()
    window = torch.randint(0, loaded.config.vocab_size, (3, 64))
    with torch.no_grad():
        assert (hf_model(window).logits - loaded.model(window)).abs().max() < TOLERANCE
    ours = loaded.model.generate(ids, max_new_tokens=50, temperature=0)
    theirs = hf_model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=50,
        min_new_tokens=50,  # tinylm's greedy decoding does not stop at EOS either
        do_sample=False,
    )
    assert ours.shape == (1, ids.shape[1] + 50)
    assert theirs.tolist() == ours.tolist()


def test_exported_encoder_logits_with_and_without_padding(tiny_checkpoints, exported) -> None:
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    loaded = load_checkpoint(tiny_checkpoints["encoder"])
    hf_model = AutoModelForMaskedLM.from_pretrained(exported["encoder"]).eval()
    assert type(hf_model).__name__ == "BertForMaskedLM"
    hf_tokenizer = AutoTokenizer.from_pretrained(exported["encoder"])
    batch = hf_tokenizer(
        ["The [MASK] is returned.", "A much longer sentence, so that the first one is padded."],
        padding=True,
        return_tensors="pt",
    )
    mask = batch["attention_mask"]
    assert not mask.all()
    with torch.no_grad():
        hf = hf_model(**batch).logits
        ours = loaded.model(batch["input_ids"], mask)
        assert (hf - ours)[mask.bool()].abs().max() < TOLERANCE
        alone = hf_tokenizer("The [MASK] is returned.", return_tensors="pt")["input_ids"]
        assert (hf_model(alone).logits - loaded.model(alone)).abs().max() < TOLERANCE


def test_pipelines_run_on_the_exported_folders(tiny_checkpoints, exported) -> None:
    from transformers import pipeline

    fill = pipeline("fill-mask", model=str(exported["encoder"]), top_k=5)
    predictions = fill("The [MASK] is returned.")
    loaded = load_checkpoint(tiny_checkpoints["encoder"])
    tokenizer = tokenizer_from_json(loaded.tokenizer_json)
    specials = special_tokens_of(tokenizer)
    ids = [specials.cls_id, *tokenizer.encode("The [MASK] is returned.").ids, specials.sep_id]
    (ours,) = loaded.model.fill_mask(torch.tensor([ids]), specials.mask_id, top_k=5)[0]
    assert [p["token"] for p in predictions] == ours.token_ids
    assert [p["score"] for p in predictions] == pytest.approx(ours.probs, abs=1e-5)

    generate = pipeline("text-generation", model=str(exported["decoder"]))
    (text,) = generate("The class", max_new_tokens=10, do_sample=False)
    assert text["generated_text"].startswith("The class")


def test_existing_folder_is_refused_unless_overwrite(tiny_checkpoints, exported, make_cfg) -> None:
    folder = exported["decoder"]
    marker = folder / "config.json"
    before = marker.read_text()
    args = ("mode=export", f"ckpt_path={tiny_checkpoints['decoder']}", "export.format=hf")
    with pytest.raises(FileExistsError, match=r"last-hf already exists; pass export.overwrite"):
        run(make_cfg(*args))
    assert marker.read_text() == before
    marker.write_text("{}")  # stale: the overwrite must replace it
    run(make_cfg(*args, "export.overwrite=true"))
    assert marker.read_text() == before
    assert [p.name for p in folder.parent.iterdir() if p.name.startswith(".")] == []


def test_settings_without_exact_equivalent_are_refused(
    tiny_checkpoints, tmp_path, make_cfg
) -> None:
    pytest.importorskip("transformers")
    # Each family's refusals are tested in tests/training/test_hf_families.py; here, through the
    # mode: an encoder whose embedding dropout differs from the residual one.
    checkpoint = torch.load(tiny_checkpoints["encoder"], weights_only=True)
    checkpoint["hyper_parameters"]["model_config"]["embd_dropout"] = 0.3
    odd = tmp_path / "odd.ckpt"
    torch.save(checkpoint, odd)
    with pytest.raises(ValueError, match=r"model.embd_dropout=0.3 differs .* hidden_dropout"):
        run(make_cfg("mode=export", f"ckpt_path={odd}", "export.format=hf"))
    assert not (tmp_path / "odd-hf").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["odd.ckpt"]


def test_without_transformers_the_hf_export_says_how_to_install(
    tiny_checkpoints, tmp_path, monkeypatch, make_cfg
) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers -> ImportError
    args = ("mode=export", f"ckpt_path={tiny_checkpoints['decoder']}", "export.format=hf")
    with pytest.raises(
        ValueError, match=r'needs Hugging Face transformers: pip install -e "\.\[hf\]"'
    ):
        run(make_cfg(*args, f"export.path={tmp_path / 'out'}"))
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match=r"export.format=onnx is unknown"):
        run(
            make_cfg(
                "mode=export", f"ckpt_path={tiny_checkpoints['decoder']}", "export.format=onnx"
            )
        )


def test_existing_folder_is_one_line_through_train_py(tiny_checkpoints, exported, tmp_path) -> None:
    proc = train_py(
        "logger=none",
        "mode=export",
        f"ckpt_path={tiny_checkpoints['decoder']}",
        "export.format=hf",
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("tinylm:")]
    assert "last-hf already exists; pass export.overwrite=true" in line
