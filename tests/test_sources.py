"""Data sources: the kinds (built-in, files, Hub) and their registry, data.path as a split
mapping, cache keys, reading every file format into a carved corpus, and bad input."""

from __future__ import annotations

import dataclasses
import socket
from pathlib import Path

import datasets
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from data.config import DataConfig
from data.corpus import Corpus, split_units
from data.sources import builtin_documents
from tests.corpora import all_texts, load_corpus, make_paragraphs, ready, write_source

CONF_DATA = Path(__file__).resolve().parents[1] / "conf" / "data"


# ----------------------------------------------------------------------------- sources


@pytest.mark.parametrize("fmt", ["txt", "jsonl", "json", "csv", "parquet"])
def test_each_file_format_loads_every_example_once(tmp_path: Path, fmt: str) -> None:
    paragraphs = make_paragraphs(40)
    column = "text" if fmt == "txt" else "body"  # a configurable column, not just "text"
    path = write_source(tmp_path / "src", fmt, paragraphs, column)
    cfg = DataConfig(source="files", path=str(path), text_column=column, cache_dir=str(tmp_path))
    corpus = load_corpus(cfg)
    assert set(corpus) == {"train", "validation", "test"}
    assert all(len(corpus[s]) > 0 for s in corpus)
    assert sorted(all_texts(corpus)) == sorted(paragraphs)


@pytest.mark.parametrize("pattern", ["dir", "glob"])
def test_directory_and_glob_read_all_files(tmp_path: Path, pattern: str) -> None:
    first, second = make_paragraphs(20, seed=1), make_paragraphs(20, seed=2)
    write_source(tmp_path / "src" / "a", "jsonl", first, "text")
    write_source(tmp_path / "src" / "b", "jsonl", second, "text")
    (tmp_path / "src" / "notes.md").write_text("not data")  # ignored: not a data file type
    path = tmp_path / "src" if pattern == "dir" else tmp_path / "src" / "*" / "*.jsonl"
    corpus = load_corpus(DataConfig(source="files", path=str(path), cache_dir=str(tmp_path)))
    assert sorted(all_texts(corpus)) == sorted(first + second)


def test_example_unit_line_cuts_lines(tmp_path: Path) -> None:
    path = tmp_path / "poem.txt"
    lines = [f"line {i} of the poem" for i in range(30)]
    path.write_text("\n".join(lines[:15]) + "\n\n" + "\n".join(lines[15:]) + "\n")
    for unit, expected in [("line", sorted(lines)), ("paragraph", None)]:
        cfg = DataConfig(source="files", path=str(path), example_unit=unit, cache_dir=str(tmp_path))
        if expected is None:  # two paragraphs cannot be carved into three splits
            with pytest.raises(ValueError, match="too few"):
                load_corpus(cfg)
        else:
            assert sorted(all_texts(load_corpus(cfg))) == expected


def test_builtin_corpus_loads_offline_and_splits_deterministically(tmp_path: Path) -> None:
    corpus = load_corpus(DataConfig(cache_dir=str(tmp_path / "one")))
    again = load_corpus(DataConfig(cache_dir=str(tmp_path / "two")))
    assert Corpus(DataConfig(cache_dir="one")).key == Corpus(DataConfig(cache_dir="two")).key
    assert corpus == again
    texts = all_texts(corpus)
    paragraphs = split_units({"text": builtin_documents()}, "paragraph")["text"]
    assert sorted(texts) == sorted(paragraphs) and sum(map(len, texts)) > 400_000
    assert len(corpus["validation"]) == round(len(texts) * 0.05)
    for split_texts in corpus.values():  # each split keeps the source's order
        remaining = iter(paragraphs)
        assert all(text in remaining for text in split_texts)
    other = load_corpus(DataConfig(cache_dir=str(tmp_path / "three"), split_seed=99))
    assert other["validation"] != corpus["validation"]


@pytest.mark.parametrize("switch", ["env", "library"])
def test_hub_offline_fails_fast_naming_dataset_and_local_route(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, switch: str
) -> None:
    if switch == "env":  # set after import: datasets itself would not notice
        monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    else:  # set before import: datasets tries its cache, and fails
        monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    cfg = DataConfig(**{**_composed_data("wikitext2"), "cache_dir": str(tmp_path)})
    # Fast means before any connection is tried (no timeouts, no retries): every one is
    # recorded and refused.
    attempts: list[object] = []

    def no_network(sock: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError("no network in this test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket.socket, "connect_ex", no_network)
    with pytest.raises(ConnectionError, match=r"Salesforce/wikitext.*data=text data\.path="):
        load_corpus(cfg)
    assert attempts == []


def _composed_data(name: str) -> dict:
    """The `data` group as Hydra composes it (the other data configs extend builtin.yaml)."""
    with initialize_config_dir(config_dir=str(CONF_DATA.parent), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"data={name}"])
    return OmegaConf.to_container(cfg.data, resolve=True)


def test_data_yamls_list_exactly_the_config_fields() -> None:
    fields = {f.name for f in dataclasses.fields(DataConfig)}
    files = sorted(CONF_DATA.glob("*.yaml"))
    assert {f.stem for f in files} >= {"builtin", "text", "wikitext2", "tinystories"}
    for file in files:
        settings = _composed_data(file.stem)
        assert set(settings) == fields, file.name
        if settings["source"] == "files":
            settings["path"] = "corpus.txt"
        DataConfig(**settings)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("settings", "error", "message"),
    [
        ({"batch_size": 0}, ValueError, r"data.batch_size=0 must be an integer >= 1"),
        ({"source": "web"}, ValueError, r"data.source='web'.*\['builtin', 'files', 'hub'\]"),
        ({"tokenizer": "bpee"}, ValueError, r"data.tokenizer='bpee'.*\['bpe', 'wordpiece', 'char'"),
        ({"tokenizer": "/no/such/tokenizer.json"}, FileNotFoundError, r"/no/such/tokenizer.json"),
        ({"source": "files"}, ValueError, r"data.path is required"),
        # A config file's typo gets a did-you-mean from parse_settings (test_reliability).
        ({"vocab_szie": 10}, TypeError, r"unexpected keyword argument 'vocab_szie'"),
        ({"example_unit": "word"}, ValueError, r"example_unit='word'.*'paragraph'"),
        ({"val_fraction": 0.7}, ValueError, r"val_fraction=0.7"),
    ],
)
def test_bad_config_is_rejected_on_creation(settings: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        DataConfig(**settings)


def test_bad_files_are_rejected_before_any_work(tmp_path: Path) -> None:
    def prepare(**settings) -> None:
        ready(DataConfig(source="files", cache_dir=str(tmp_path / "cache"), **settings))

    with pytest.raises(FileNotFoundError, match="no such file"):
        prepare(path=str(tmp_path / "missing.txt"))
    with pytest.raises(FileNotFoundError, match="matches no data files"):
        prepare(path=str(tmp_path / "*.parquet"))
    (tmp_path / "empty.txt").write_text("\n  \n\n")
    with pytest.raises(ValueError, match="has no text"):
        prepare(path=str(tmp_path / "empty.txt"))
    table = write_source(tmp_path / "t", "csv", make_paragraphs(10), "body")
    with pytest.raises(ValueError, match=r"text_column='text'.*\['body', 'other'\]"):
        prepare(path=str(table))
    (tmp_path / "notes.md").write_text("# notes")
    with pytest.raises(ValueError, match="unsupported file type"):
        prepare(path=str(tmp_path / "notes.md"))
    assert not (tmp_path / "cache" / "tokenizers").exists()  # nothing was trained


def test_a_malformed_file_is_one_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "fine"}\n{"text": broken\n')
    cfg = DataConfig(source="files", path=str(path), cache_dir=str(tmp_path / "cache"))
    with pytest.raises(ValueError, match=r"cannot read data\.path='?.*bad\.jsonl'?: .*JSON"):
        load_corpus(cfg)
