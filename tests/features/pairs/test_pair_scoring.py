"""Minimal-pair scoring at its edges (``features/pairs/command.py``,
``features/pairs/sentence_scores.py``), on untrained tiny checkpoints written here (a character
tokenizer, no training run): every field of a pair record and which weights and checkpoint
contents it scored, the device the pairs run on, the settings refused with their messages, the
shortest sequences each architecture scores, and how sequences share forward passes. Scores and
accuracies are recomputed from the network's logits one sentence (one masked token) at a time.
Each test kills mutants the fast pair tests left alive (``python -m tools.mutation --module
features/pairs/command.py`` and ``--module features/pairs/sentence_scores.py``)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from conf.schema import Settings
from data.tokenizer import special_tokens_of, tokenizer_from_json
from features.pairs import command
from features.pairs.pair_sets import frame_sentence, read_pairs
from features.pairs.sentence_scores import (
    decoder_log_likelihoods,
    length_batches,
    pseudo_log_likelihoods,
)
from models.transformer import build_model
from tests.evaluation_helpers import WINDOW, untrained_checkpoint
from tests.features.pairs.test_pairs import _decoder_loop, _pair_file, _pll_loop, pairs_settings
from training.checkpoint import load_checkpoint, read_checkpoint

STEP = 7
# Pairs of two paradigms, listed out of order, and a pair whose sentences are the same (a tie).
PAIRS = [
    {"sentence_good": "a cat.", "sentence_bad": "cat a.", "UID": "order"},
    {"sentence_good": "dogs.", "sentence_bad": "dgos.", "UID": "spelling"},
    {"sentence_good": "a dog.", "sentence_bad": "a dog.", "UID": "order"},
    {"sentence_good": "cats.", "sentence_bad": "ctas.", "UID": "spelling"},
    {"sentence_good": "cat.", "sentence_bad": "act.", "UID": "order"},
]
RECORD_KEYS = {
    "checkpoint",
    "step",
    "arch",
    "weights",
    "weights_seed",
    "pairs",
    "pairs_fingerprint",
    "provenance",
    "paradigm",
    "n_pairs",
    "pair_acc",
    "pair_acc_se",
    "ties",
    "mean_margin",
}


def _settings(target: Path, tmp_path: Path, *overrides: str) -> Settings:
    """``mode=pairs`` on ``target``, writing into ``tmp_path``, with ``overrides`` recorded
    as a command line's."""
    return pairs_settings(target, f"output_dir={tmp_path}", *overrides)


def _checkpoint(path: Path, arch: str) -> Path:
    """An untrained tiny ``arch`` with a character tokenizer of PAIRS' sentences, saved at
    global step STEP as a training run saves its checkpoints (seeded 0, not the run's 1234:
    eval.weights=untrained draws others)."""
    text = " ".join(row[key] for row in PAIRS for key in ("sentence_good", "sentence_bad"))
    return untrained_checkpoint(path, arch, [text], step=STEP)


def _sentence_scores(model: nn.Module, tokenizer_json: str, arch: str) -> dict[str, float]:
    """Every sentence of PAIRS scored alone by ``model``, from its logits in float64."""
    tokenizer = tokenizer_from_json(tokenizer_json)
    mask_id = special_tokens_of(tokenizer).mask_id
    scores = {}
    for row in PAIRS:
        for text in (row["sentence_good"], row["sentence_bad"]):
            framed = frame_sentence(tokenizer, text, arch, WINDOW, "test")
            if arch == "decoder":
                scores[text] = _decoder_loop(model, framed)
            else:
                scores[text] = _pll_loop(model, framed, mask_id)
    return scores


def _expected_accuracy(margins: list[float]) -> dict[str, Any]:
    """BLiMP's rule over pairs with these good - bad margins: strictly above is right."""
    n = len(margins)
    acc = sum(m > 0 for m in margins) / n
    return {
        "n_pairs": n,
        "pair_acc": acc,
        "pair_acc_se": math.sqrt(acc * (1 - acc) / n),
        "ties": sum(m == 0 for m in margins),
        "mean_margin": sum(margins) / n,
    }


def _check_accuracies(records: list[dict[str, Any]], scores: dict[str, float]) -> None:
    """The records of one checkpoint: per paradigm (sorted), then over all pairs."""
    margins = {"all": [scores[r["sentence_good"]] - scores[r["sentence_bad"]] for r in PAIRS]}
    for row, margin in zip(PAIRS, margins["all"], strict=True):
        margins.setdefault(row["UID"], []).append(margin)
    assert [r["paradigm"] for r in records] == ["order", "spelling", "all"]
    for record in records:
        expected = _expected_accuracy(margins[record["paradigm"]])
        assert {k: record[k] for k in ("n_pairs", "pair_acc", "ties")} == {
            k: expected[k] for k in ("n_pairs", "pair_acc", "ties")
        }
        assert record["pair_acc_se"] == pytest.approx(expected["pair_acc_se"])
        assert record["mean_margin"] == pytest.approx(expected["mean_margin"], abs=1e-4)
    # The pairs are not all alike: right, wrong and a tie among them.
    assert 0 < records[-1]["pair_acc"] < 1 and records[-1]["ties"] == 1


# --------------------------------------------------------------------------- records


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_records_score_the_contents_read_and_name_what_was_scored(tmp_path, arch) -> None:
    first = _checkpoint(tmp_path / "a" / "last.ckpt", arch)
    second = _checkpoint(tmp_path / "b" / "last.ckpt", arch)
    pairs = _pair_file(tmp_path / "pairs.jsonl", PAIRS)
    settings = _settings(first, tmp_path, f"pairs.path={pairs}")
    # The first checkpoint's contents, read already (as a caller may hand them): they are the ones
    # scored, not the file read again, and they are taken out of ``read``.
    contents = read_checkpoint(first)
    contents["global_step"] = STEP + 2
    read = {first: contents}
    records = command.evaluate_all([first, second], settings, read)
    assert read == {}
    assert len(records) == 2 * 3
    pair_set = read_pairs(str(pairs))
    loaded = load_checkpoint(first)
    scores = _sentence_scores(loaded.model, loaded.tokenizer_json, arch)
    for ckpt, step, mine in ((first, STEP + 2, records[:3]), (second, STEP, records[3:])):
        for record in mine:
            assert set(record) == RECORD_KEYS
            assert record["checkpoint"] == str(ckpt.resolve())
            assert (record["step"], record["arch"]) == (step, arch)
            assert (record["weights"], record["weights_seed"]) == ("trained", None)
            assert record["pairs"] == pair_set.name == str(pairs.resolve())
            assert record["pairs_fingerprint"] == pair_set.fingerprint
            assert record["provenance"]["precision"] == "32-true"
        _check_accuracies(mine, scores)  # both checkpoints hold the same weights


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_untrained_weights_are_drawn_from_the_seed(tmp_path, arch) -> None:
    ckpt = _checkpoint(tmp_path / "last.ckpt", arch)
    pairs = _pair_file(tmp_path / "pairs.jsonl", PAIRS)
    settings = _settings(ckpt, tmp_path, f"pairs.path={pairs}", "eval.weights=untrained", "seed=3")
    records = command.evaluate_pairs(ckpt, settings, read_pairs(str(pairs)))
    assert {(r["weights"], r["weights_seed"]) for r in records} == {("untrained", 3)}
    loaded = load_checkpoint(ckpt)
    torch.manual_seed(3)
    fresh = build_model(loaded.config)
    _check_accuracies(records, _sentence_scores(fresh, loaded.tokenizer_json, arch))


def test_on_a_gpu_the_network_moves_there_and_the_record_names_it(tmp_path, monkeypatch) -> None:
    ckpt = _checkpoint(tmp_path / "last.ckpt", "decoder")
    pairs = _pair_file(tmp_path / "pairs.jsonl", PAIRS)
    settings = _settings(ckpt, tmp_path, f"pairs.path={pairs}", "trainer.accelerator=gpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: "Test GPU")
    # There is no GPU here: the meta device stands in for it, and a scorer that gives every
    # sentence 0 says where the network it was handed lies.
    monkeypatch.setattr(command, "_device", lambda settings: torch.device("meta"))
    scored_on = []

    def scorer(model: nn.Module, sequences: list[list[int]]) -> torch.Tensor:
        scored_on.append(next(model.parameters()).device)
        return torch.zeros(len(sequences), dtype=torch.float64)

    monkeypatch.setattr(command, "decoder_log_likelihoods", scorer)
    records = command.evaluate_pairs(ckpt, settings, read_pairs(str(pairs)))
    assert scored_on == [torch.device("meta")]
    assert {r["provenance"]["device"] for r in records} == {"GPU: Test GPU"}
    assert (records[-1]["pair_acc"], records[-1]["ties"]) == (0.0, len(PAIRS))


@pytest.mark.parametrize(
    ("accelerator", "cuda_available", "device"),
    [
        ("auto", True, "cuda"),
        ("gpu", True, "cuda"),
        ("cuda", True, "cuda"),
        ("cpu", True, "cpu"),
        ("auto", False, "cpu"),
        ("gpu", False, "cpu"),
    ],
)
def test_pairs_are_scored_on_the_gpu_the_accelerator_asks_for(
    tmp_path, monkeypatch, accelerator, cuda_available, device
) -> None:
    settings = _settings(tmp_path / "x.ckpt", tmp_path, f"trainer.accelerator={accelerator}")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda_available)
    assert command._device(settings) == torch.device(device)


# --------------------------------------------------------------------------- refusals


def test_a_classifier_checkpoint_is_refused_for_mode_pairs(tmp_path) -> None:
    ckpt = _checkpoint(tmp_path / "last.ckpt", "encoder")
    contents = read_checkpoint(ckpt)
    contents["hyper_parameters"]["classifier"] = {
        "task": "sst2",
        "pretrained": {"checkpoint": "pretrained.ckpt"},
    }
    pair_set = read_pairs(str(_pair_file(tmp_path / "pairs.jsonl", PAIRS)))
    settings = _settings(ckpt, tmp_path, "pairs.path=builtin")
    with pytest.raises(ValueError) as err:
        command.evaluate_pairs(ckpt, settings, pair_set, contents)
    assert str(err.value) == (
        f"{ckpt} is a classifier fine-tuned on sst2 (mode=finetune), not a language model; "
        "mode=pairs needs a pretrained checkpoint, such as the one it was fine-tuned from: "
        "pretrained.ckpt"
    )


def test_a_model_setting_that_differs_from_the_checkpoint_is_refused(tmp_path) -> None:
    ckpt = _checkpoint(tmp_path / "last.ckpt", "decoder")
    pair_set = read_pairs(str(_pair_file(tmp_path / "pairs.jsonl", PAIRS)))
    settings = _settings(ckpt, tmp_path, "pairs.path=builtin", "model.hidden_size=64")
    with pytest.raises(ValueError) as err:
        command.evaluate_pairs(ckpt, settings, pair_set)
    assert str(err.value).startswith(
        f"mode=pairs takes the model config from the checkpoint {ckpt}, which differs from "
        "model.hidden_size on the command line"
    )


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"data": "wikitext"}, "data"),
        ({"seed": "1", "data.path": "x", "data.split": "y"}, "data.path"),
    ],
)
def test_data_settings_are_refused_by_the_first_one(tmp_path, overrides, named) -> None:
    settings = replace(_settings(tmp_path / "x.ckpt", tmp_path), overrides=overrides)
    with pytest.raises(ValueError) as err:
        command.evaluate_all([], settings, {})
    assert str(err.value) == (
        f"{named} is for text; mode=pairs scores its sentences with the checkpoint's "
        "tokenizer and no data: drop the data settings"
    )


# --------------------------------------------------------------------------- sentence scores


def test_the_shortest_sequences_each_architecture_scores(tmp_path) -> None:
    decoder = load_checkpoint(_checkpoint(tmp_path / "d.ckpt", "decoder")).model
    encoder = load_checkpoint(_checkpoint(tmp_path / "e.ckpt", "encoder")).model
    # A decoder scores the tokens after the first: two tokens are one score.
    (score,) = decoder_log_likelihoods(decoder, [[1, 5]]).tolist()
    assert score == pytest.approx(_decoder_loop(decoder, [1, 5]), abs=1e-5)
    with pytest.raises(ValueError) as err:
        decoder_log_likelihoods(decoder, [[1, 5], [1], []])
    assert str(err.value) == (
        "sequence 1 has 1 tokens, fewer than 2: a decoder scores the tokens after the first"
    )
    # An encoder scores the tokens between [CLS] and [SEP]: three tokens are one score.
    (score,) = pseudo_log_likelihoods(encoder, [[1, 5, 2]], mask_id=3).tolist()
    assert score == pytest.approx(_pll_loop(encoder, [1, 5, 2], 3), abs=1e-5)
    with pytest.raises(ValueError) as err:
        pseudo_log_likelihoods(encoder, [[1, 5, 6, 2], [1, 2], [1]], mask_id=3)
    assert str(err.value) == (
        "sequence 1 has 2 tokens, fewer than 3: an encoder scores the tokens between [CLS] "
        "and [SEP]"
    )


def _pass_shapes(model: nn.Module) -> list[tuple[int, int]]:
    """The (rows, width) of the ids of every forward pass ``model`` runs from now on."""
    shapes: list[tuple[int, int]] = []
    model.register_forward_hook(lambda module, args, output: shapes.append(tuple(args[0].shape)))
    return shapes


def test_decoder_sequences_share_passes_up_to_max_tokens(tmp_path) -> None:
    model = load_checkpoint(_checkpoint(tmp_path / "d.ckpt", "decoder")).model
    sequences = [[1, 4, 5, 6], [1, 4], [1, 6, 5], [1, 5, 5, 4]]
    shapes = _pass_shapes(model)
    scores = decoder_log_likelihoods(model, sequences, max_tokens=8)
    # Shortest first, one row per sequence: lengths 2 and 3 (2 rows x 3 = 6 tokens), then the
    # two of length 4 (2 x 4 = 8, exactly the limit); the network reads all but the last id.
    assert shapes == [(2, 2), (2, 3)]
    expected = [_decoder_loop(model, s) for s in sequences]
    assert scores.tolist() == pytest.approx(expected, abs=1e-5)


def test_encoder_rows_share_passes_up_to_max_tokens(tmp_path) -> None:
    model = load_checkpoint(_checkpoint(tmp_path / "e.ckpt", "encoder")).model
    sequences = [[1, 4, 5, 2], [1, 6, 2], [1, 5, 6, 2]]
    shapes = _pass_shapes(model)
    scores = pseudo_log_likelihoods(model, sequences, mask_id=3, max_tokens=12)
    # A row per inner token, shortest first: the sequences of 3 and 4 tokens are 1 + 2 rows
    # of width 4 (12 tokens, exactly the limit), the other of 4 tokens its 2 rows alone.
    assert shapes == [(3, 4), (2, 4)]
    expected = [_pll_loop(model, s, 3) for s in sequences]
    assert scores.tolist() == pytest.approx(expected, abs=1e-5)


def test_batches_go_shortest_first_and_a_long_sequence_alone() -> None:
    sequences = [[0] * 5, [0] * 2, [0] * 9, [0] * 3]
    # One row each, at most 10 tokens a pass: 2 and 3 (2 x 3 = 6), then 5 (3 x 5 would be 15),
    # then 9 alone.
    assert list(length_batches(sequences, lambda n: 1, 10)) == [[1, 3], [0], [2]]
    # Over the limit alone: a batch of its own, never an empty one before it.
    assert list(length_batches([[0] * 9], lambda n: 1, 4)) == [[0]]
