"""The tokenizer's training sample (data.tokenizer_sample_bytes): bounded, seeded, drawn across
the whole corpus, named by the cache key (unchanged for a corpus that fits it), the same setting
for streaming; old checkpoints with the retired data.stream_tokenizer_examples still load."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from data.config import DataConfig
from data.corpus import Corpus
from data.datamodule import prepare
from data.tokenizer import tokenizer_key
from data.tokenizer_sample import head, sample_key
from tests.corpora import make_paragraphs, small_cfg, write_source

PARAGRAPHS = 3000


@pytest.fixture
def big(tmp_path: Path) -> Path:
    """A txt corpus of PARAGRAPHS numbered paragraphs ("Paragraph i: ..."), ~0.1 MB."""
    return write_source(tmp_path / "big", "txt", make_paragraphs(PARAGRAPHS), "text")


def _cfg(path: Path, tmp_path: Path, **overrides) -> DataConfig:
    return DataConfig(
        source="files", path=str(path), cache_dir=str(tmp_path / "cache"), **overrides
    )


def _sample(cfg: DataConfig) -> list[str]:
    return [text for batch in Corpus(cfg).tokenizer_texts() for text in batch]


def _index(paragraph: str) -> int:
    return int(paragraph.split(":")[0].removeprefix("Paragraph "))


def test_sample_is_seeded_and_reproducible(big: Path, tmp_path: Path) -> None:
    budget = big.stat().st_size // 5
    first = _sample(_cfg(big, tmp_path, tokenizer_sample_bytes=budget))
    assert first == _sample(_cfg(big, tmp_path, tokenizer_sample_bytes=budget))
    other_seed = _sample(_cfg(big, tmp_path, tokenizer_sample_bytes=budget, split_seed=99))
    assert other_seed != first
    assert len(set(other_seed) & set(first)) < len(first) / 2  # another sample, not a shift


def test_sample_spreads_over_the_corpus_within_its_budget(big: Path, tmp_path: Path) -> None:
    budget = big.stat().st_size // 5
    cfg = _cfg(big, tmp_path, tokenizer_sample_bytes=budget)
    sample = _sample(cfg)
    assert sum(len(text.encode()) for text in sample) <= budget
    # About budget / size of the training examples, from every tenth of the file.
    assert 0.15 * PARAGRAPHS < len(sample) < 0.2 * PARAGRAPHS
    tenths = {_index(text) * 10 // PARAGRAPHS for text in sample}
    assert tenths == set(range(10))
    corpus = Corpus(cfg)
    held_out = {t for split in ("validation", "test") for b in corpus.texts(split) for t in b}
    assert held_out and not held_out & set(sample)  # train examples only


def test_corpus_within_the_budget_trains_on_all_of_train_under_the_old_key(
    tmp_path: Path,
) -> None:
    cfg = small_cfg(tmp_path)
    corpus = Corpus(cfg)
    assert corpus.tokenizer_sample_key == ()
    assert list(corpus.tokenizer_texts()) == list(corpus.texts("train"))  # same batches too
    # The key of versions before the sample: stable_hash(kind, vocab_size, corpus key).
    assert tokenizer_key("bpe", 2048, "corpus-key") == "be80c9dd18f092aa"
    prepare(cfg, "decoder")
    (trained,) = (Path(cfg.cache_dir) / "tokenizers").iterdir()
    assert trained.name == f"bpe-{tokenizer_key('bpe', cfg.vocab_size, corpus.key)}.json"


def test_cache_key_changes_with_the_sample_setting(big: Path, tmp_path: Path) -> None:
    size = big.stat().st_size
    keys = {tokenizer_key("bpe", 300, "k", sample_key(b, size)) for b in (size // 5, size // 4)}
    assert len(keys) == 2
    assert sample_key(size, size) == sample_key(size + 1, size) == ()  # fits: the old key
    assert sample_key(size, None) == ("sample", size)  # size unknown: the head, keyed
    for budget in (size // 5, size // 4):
        prepare(_cfg(big, tmp_path, tokenizer_sample_bytes=budget, vocab_size=300), "decoder")
    assert len(list((tmp_path / "cache" / "tokenizers").iterdir())) == 2  # retrained


def test_head_stops_at_the_budget_with_the_example_that_reaches_it() -> None:
    batches = [["ab", "cd"], ["ef", "gh"]]
    assert list(head(batches, 5)) == [["ab", "cd"], ["ef"]]
    assert list(head(batches, 1)) == [["ab"]]
    assert list(head(batches, 100)) == batches


def test_a_sample_without_examples_is_one_clear_error(tmp_path: Path) -> None:
    path = write_source(tmp_path / "docs", "txt", make_paragraphs(20), "text")
    cfg = _cfg(path, tmp_path, example_unit="line", tokenizer_sample_bytes=1)
    with pytest.raises(ValueError, match="drew no training example: raise it"):
        _sample(cfg)


def test_retired_stream_tokenizer_examples_key_still_loads(
    tiny_ckpt: Path, tmp_path: Path, make_cfg
) -> None:
    """A checkpoint of a version with data.stream_tokenizer_examples loads, evaluates and
    resumes; the key is dropped (its tokenizer travels in the checkpoint)."""
    from train import run
    from training.checkpoint import read_checkpoint
    from training.task import task_from_hparams

    values = dataclasses.asdict(DataConfig())
    assert DataConfig(**values, stream_tokenizer_examples=20000) == DataConfig()
    old = read_checkpoint(tiny_ckpt)
    old["hyper_parameters"]["data_config"]["stream_tokenizer_examples"] = 20000
    old_ckpt = tmp_path / "old.ckpt"
    torch.save(old, old_ckpt)
    task = task_from_hparams(read_checkpoint(old_ckpt)["hyper_parameters"])
    assert "stream_tokenizer_examples" not in task.hparams["data_config"]  # dropped
    evaluated = run(make_cfg("mode=eval", f"ckpt_path={old_ckpt}"))
    assert evaluated["results"][0]["loss"] > 0
    resumed = run(make_cfg(f"ckpt_path={old_ckpt}", "trainer.max_steps=18"))
    assert resumed["step"] == 18
