"""``data.evaluation``: which data ``mode=eval`` scores a checkpoint on (an explicit
``data.source`` deciding the kind even where the keys given name two; keys that name two kinds
refused, with the way out), and that text's counts against recounts written here from the text;
checkpoints of earlier versions still evaluate."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

import modes.eval
from conf.hydra_runtime import parse_settings
from data.collate import IGNORE_INDEX, MLMCollator
from data.config import DataConfig
from data.corpus import corpus_key, whole_key
from data.evaluation import EvaluationData, ScoredText, data_to_evaluate
from data.tokenizer import special_tokens_of, train_tokenizer
from tests.conftest import compose_config
from tests.corpora import make_paragraphs
from train import run

WINDOW, STRIDE = 16, 4


def _text_file(path: Path, paragraphs: list[str]) -> str:
    path.write_text("\n\n".join(paragraphs) + "\n")
    return str(path)


def test_the_runs_own_split_unless_the_command_line_names_text() -> None:
    trained = DataConfig(source="files", path="corpus.txt", tokenizer="char")
    builtin = DataConfig()  # what the command line's data group is without data=...
    assert data_to_evaluate(trained, builtin, []) == EvaluationData(trained, whole=False)
    test = data_to_evaluate(trained, DataConfig(split="test"), ["data.split", "seed"])
    assert test == EvaluationData(replace(trained, split="test"), whole=False)
    smaller = data_to_evaluate(trained, DataConfig(batch_size=2), ["data.batch_size"])
    assert smaller == EvaluationData(replace(trained, batch_size=2), whole=False)
    # A key only one kind of source needs names that kind: data.path=FILE alone is that file.
    on_file = data_to_evaluate(builtin, DataConfig(path="held.txt"), ["data.path"])
    assert (on_file.cfg.source, on_file.cfg.path, on_file.whole) == (
        "files", {"train": "held.txt"}, True
    )  # fmt: skip
    on_hub = data_to_evaluate(trained, DataConfig(name="org/set"), ["data.name"])
    assert (on_hub.cfg.source, on_hub.cfg.name, on_hub.whole) == ("hub", "org/set", True)
    column = data_to_evaluate(
        trained,
        DataConfig(path="corpus.txt", text_column="body"),
        ["data.path", "data.text_column"],
    )
    assert column == EvaluationData(replace(trained, text_column="body"), whole=True)
    asked = DataConfig(source="files", path="held.txt", tokenizer="bpe")
    assert data_to_evaluate(trained, asked, ["data", "data.path"]) == EvaluationData(asked, True)


def test_another_kind_of_source_drops_the_runs_own_source_keys() -> None:
    trained = DataConfig(path="train.txt", text_column="body")
    asked = DataConfig(source="hub", name="org/set")
    chosen = data_to_evaluate(trained, asked, ["data.source", "data.name"])
    assert (chosen.cfg.source, chosen.cfg.name, chosen.whole) == ("hub", "org/set", True)
    assert (chosen.cfg.path, chosen.cfg.text_column) == (None, "text")  # not the run's file


def test_keys_that_name_two_kinds_of_source_are_refused_with_the_way_out() -> None:
    with pytest.raises(ValueError) as error:
        DataConfig(name="org/set", path="held.txt")
    assert str(error.value) == (
        "data.path, data.name name different kinds of source; add data.source=files or hub "
        "to say which to read"
    )


def test_decoder_counts_match_a_recount_by_windows(tmp_path: Path) -> None:
    paragraphs = make_paragraphs(20)
    held = _text_file(tmp_path / "held.txt", paragraphs)
    tokenizer = train_tokenizer("char", [paragraphs], 300)
    cfg = DataConfig(source="files", path=held, cache_dir=str(tmp_path / "cache"))
    _, text = EvaluationData(cfg, whole=True).prepare(
        "decoder", WINDOW, seed=0, tokenizer_json=tokenizer.to_str(), stride=STRIDE
    )
    eos = special_tokens_of(tokenizer).eos_id
    ids = [tokenizer.encode(p, add_special_tokens=False).ids for p in paragraphs]
    stream = [i for document in ids for i in [*document, eos]]
    scored, start = 0, 0
    while start + WINDOW + 1 <= len(stream):  # the first window scores all, the others the new
        scored += WINDOW if start == 0 else STRIDE
        start += STRIDE
    assert text == ScoredText(
        data=held,
        fingerprint=whole_key(cfg),
        split="validation",
        label="all",  # the file has no splits of its own: all of it
        tokens=len(stream),
        characters=sum(len(p) + 1 for p in paragraphs),
        bytes=sum(len(p.encode()) + 1 for p in paragraphs),
        tokens_scored=scored,
    )
    with pytest.raises(ValueError, match=r"the data .*short.txt has \d+ tokens, too few .* 17"):
        short = DataConfig(source="files", path=_text_file(tmp_path / "short.txt", ["a b"]))
        EvaluationData(replace(short, cache_dir=cfg.cache_dir), whole=True).prepare(
            "decoder", WINDOW, seed=0, tokenizer_json=tokenizer.to_str(), stride=STRIDE
        )


def test_the_split_label_and_fingerprint_say_what_was_read(tmp_path: Path) -> None:
    paths = {
        split: _text_file(tmp_path / f"{split}.txt", make_paragraphs(12, seed=n))
        for n, split in enumerate(("train", "validation", "test"))
    }
    tokenizer = train_tokenizer("char", [make_paragraphs(40)], 300).to_str()
    cfg = DataConfig(source="files", path=paths, split="test", cache_dir=str(tmp_path / "c"))
    for whole in (False, True):  # fixed split files: the split is named, read whole or not
        _, text = EvaluationData(cfg, whole).prepare("decoder", WINDOW, 0, tokenizer, None)
        assert (text.split, text.label) == ("test", "test")
        assert text.fingerprint == (whole_key(cfg) if whole else corpus_key(cfg))
        assert text.data == str(paths)


def test_encoder_counts_its_masked_tokens(tmp_path: Path) -> None:
    paragraphs = make_paragraphs(30)
    held = _text_file(tmp_path / "held.txt", paragraphs)
    tokenizer = train_tokenizer("wordpiece", [paragraphs], 300)
    cfg = DataConfig(source="files", path=held, batch_size=4, cache_dir=str(tmp_path / "cache"))
    _, text = EvaluationData(cfg, whole=True).prepare(
        "encoder", WINDOW, seed=3, tokenizer_json=tokenizer.to_str(), stride=None
    )
    # Each paragraph is one example, [CLS] its first WINDOW - 2 tokens [SEP], in order; the
    # collator masks a batch by the seed and its content.
    specials = special_tokens_of(tokenizer)
    ids = [tokenizer.encode(p, add_special_tokens=False).ids for p in paragraphs]
    examples = [np.array([specials.cls_id, *d[: WINDOW - 2], specials.sep_id]) for d in ids]
    vocab = tokenizer.get_vocab_size(with_added_tokens=True)
    masked, real = 0, sum(len(e) - 2 for e in examples)
    for start in range(0, len(examples), 4):
        collator = MLMCollator(specials, vocab, WINDOW, cfg.mlm_probability, seed=3)
        labels = collator(examples[start : start + 4])["labels"]
        masked += int(torch.count_nonzero(labels != IGNORE_INDEX))
    assert text.tokens_scored == masked
    assert 0.05 < masked / real < 0.3  # about mlm_probability of the real tokens
    assert text.tokens == sum(map(len, ids)) + len(paragraphs)  # every document and its EOS


@pytest.mark.slow
def test_a_checkpoint_of_earlier_versions_evaluates_as_it_did(tmp_path: Path) -> None:
    """Checkpoints written before data.path became a mapping hold the path as typed
    (``compose_config``: the tiny settings)."""
    corpus = _text_file(tmp_path / "corpus.txt", make_paragraphs(200))
    out = tmp_path / "run"
    run(compose_config("data=text", f"data.path={corpus}", f"output_dir={out}"))
    ckpt = out / "checkpoints" / "last.ckpt"
    checkpoint = torch.load(ckpt, weights_only=True)
    assert checkpoint["hyper_parameters"]["data_config"]["path"] == {"train": corpus}
    checkpoint["hyper_parameters"]["data_config"]["path"] = corpus
    earlier = tmp_path / "earlier" / "last.ckpt"
    earlier.parent.mkdir()
    torch.save(checkpoint, earlier)

    def evaluate(path: Path) -> dict:
        cfg = compose_config("mode=eval", f"ckpt_path={path}", f"output_dir={tmp_path}")
        return modes.eval.run(replace(parse_settings(cfg), overrides={}))["results"][0]

    now, then = evaluate(ckpt), evaluate(earlier)
    assert then == {**now, "checkpoint": str(earlier.resolve())}
    assert (then["data"], then["split"]) == (corpus, "validation")
