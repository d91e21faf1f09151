"""Data sources: the kinds (built-in, files, Hub) and their registry, data.path as a split
mapping, cache keys, reading every file format into a carved corpus, and bad input."""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
from pathlib import Path

import datasets
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import data.sources
from common.files import stable_hash
from data.config import DataConfig
from data.corpus import Corpus, corpus_key, split_units, whole_key
from data.sources import SOURCES, Source, builtin_documents, keys_read, kind_keys, source_of
from tests.conftest import ROOT
from tests.corpora import all_texts, load_corpus, make_paragraphs, ready, write_source

CONF_DATA = ROOT / "conf" / "data"
WIKITEXT = {"source": "hub", "name": "Salesforce/wikitext", "config_name": "wikitext-2-raw-v1"}
MTIME_NS = 1_700_000_000_000_000_000


def _file(path: Path, text: str) -> str:
    """``text`` at ``path`` with a fixed mtime (part of a file's fingerprint)."""
    path.write_text(text)
    os.utime(path, ns=(MTIME_NS, MTIME_NS))
    return str(path)


# ----------------------------------------------------------------------------- kinds


def test_the_registry_holds_exactly_the_data_source_choices() -> None:
    assert list(SOURCES) == ["builtin", "files", "hub"]
    assert all(kind.name == name and issubclass(kind, Source) for name, kind in SOURCES.items())
    chosen = {file.stem: _composed_data(file.stem)["source"] for file in CONF_DATA.glob("*.yaml")}
    assert chosen.pop("builtin") == "auto"  # the default picks its kind from data.path/data.name
    assert DataConfig().source == "builtin"
    assert set(chosen.values()) | {"builtin"} == set(SOURCES)  # every kind has a conf/data yaml
    with pytest.raises(
        ValueError, match=r"^data.source='web' is not valid; choose one of \["
    ) as err:
        DataConfig(source="web")
    assert "\n" not in str(err.value)


def test_a_new_kind_is_a_choice_and_a_half_added_one_cannot_exist(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(data.sources, "SOURCES", dict(SOURCES))  # the kinds defined here go

    class Labelled(data.sources.BuiltinSource, name="labelled"):
        keys = ("text_column",)  # what it reads: refused for the kinds that do not

        def check(self) -> None:
            if self.cfg.text_column != "sentence":
                raise ValueError("data.text_column must be sentence for labelled data")

    assert isinstance(source_of(DataConfig(source="labelled", text_column="sentence")), Labelled)
    with pytest.raises(ValueError, match="must be sentence"):  # its checks run on creation
        DataConfig(source="labelled")
    with pytest.raises(
        ValueError,
        match=r"text_column=sentence is not read by data.source=builtin.*or data.source=labelled",
    ):
        DataConfig(source="builtin", text_column="sentence")
    with pytest.raises(TypeError, match=r"'half' must define display_name, fingerprint, load"):

        class Half(Source, name="half"):
            def check(self) -> None:
                pass

    assert "half" not in data.sources.SOURCES
    with pytest.raises(ValueError, match=r"data.source='half' is not valid"):
        DataConfig(source="half")


def test_each_kind_names_itself_its_splits_and_its_size(tmp_path: Path) -> None:
    one = _file(tmp_path / "one.txt", "a b c\n")
    valid = _file(tmp_path / "valid.txt", "d e\n")
    paths = {"train": one, "validation": valid}
    builtin_bytes = sum(len(text.encode()) for text in builtin_documents())
    assert builtin_bytes > 400_000
    expected = {  # (display name, own splits, carves the missing ones, size in bytes)
        "builtin": (DataConfig(), "builtin", False, True, builtin_bytes),
        "one path": (DataConfig(source="files", path=one), one, False, True, 6),
        "mapping": (DataConfig(source="files", path=paths), str(paths), True, False, 10),
        "hub": (DataConfig(**WIKITEXT), "Salesforce/wikitext/wikitext-2-raw-v1", True, True, None),
    }
    for case, (cfg, name, own, carves, size) in expected.items():
        source = source_of(cfg)
        assert source.display_name == name, case
        assert (source.has_own_splits, source.carves_missing_splits) == (own, carves), case
        assert source.size_bytes() == size, case
    assert source_of(DataConfig(source="hub", name="org/set")).display_name == "org/set"


# A value for each key that only some kinds read, and what each kind cannot do without.
KIND_KEY_VALUES = {"path": "a.txt", "name": "org/set", "config_name": "c", "text_column": "body"}
KIND_NEEDS = {"builtin": {}, "files": {"path": "a.txt"}, "hub": {"name": "org/set"}}


@pytest.mark.parametrize(
    ("kind", "key"),
    [(kind, key) for kind in SOURCES for key in sorted(kind_keys() - set(keys_read(kind)))],
)
def test_every_kind_refuses_every_source_key_it_does_not_read(kind: str, key: str) -> None:
    given = {**KIND_NEEDS[kind], key: KIND_KEY_VALUES[key]}
    with pytest.raises(ValueError, match=rf"^data\.{key}=\S+ is not read by data\.source={kind}, "):
        DataConfig(source=kind, **given)
    assert DataConfig(source=kind, **KIND_NEEDS[kind]).source == kind  # without it: accepted


def test_every_kind_reads_its_own_source_keys() -> None:
    for kind in SOURCES:
        given = {**KIND_NEEDS[kind], **{key: KIND_KEY_VALUES[key] for key in keys_read(kind)}}
        cfg = DataConfig(source=kind, **given)
        assert all(getattr(cfg, key) for key in keys_read(kind))


def test_auto_picks_the_kind_the_keys_name_and_keeps_its_cache_key(tmp_path: Path) -> None:
    text = _file(tmp_path / "mine.txt", "my own text\n\nand more of it\n")
    with initialize_config_dir(config_dir=str(CONF_DATA.parent), version_base="1.3"):
        tree = compose(config_name="config", overrides=[f"data.path={text}"])
    on_file = DataConfig(**OmegaConf.to_container(tree.data, resolve=True))
    assert (on_file.source, on_file.path) == ("files", {"train": text})  # not the built-in docs
    assert Corpus(on_file).key == Corpus(DataConfig(source="files", path=text)).key
    assert DataConfig(name="org/set").source == "hub"
    assert Corpus(DataConfig()).key == Corpus(DataConfig(source="builtin")).key


def test_fingerprints_read_no_contents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_reading(*args: object, **kwargs: object) -> None:
        raise AssertionError("a fingerprint read the source")

    monkeypatch.setattr(datasets, "load_dataset", no_reading)
    monkeypatch.setattr(socket.socket, "connect", no_reading)
    one, valid = _file(tmp_path / "one.txt", "a b c\n"), _file(tmp_path / "v.txt", "d e\n")
    stat = {f: (str(Path(f).resolve()), Path(f).stat().st_size, MTIME_NS) for f in (one, valid)}
    mapping = DataConfig(source="files", path={"train": one, "validation": valid})
    assert source_of(DataConfig()).fingerprint() == ["builtin", sys.version]
    assert source_of(DataConfig(**WIKITEXT)).fingerprint() == [
        "hub",
        *list(WIKITEXT.values())[1:],
        "text",
    ]
    assert source_of(DataConfig(source="files", path=one)).fingerprint() == [
        "files", [stat[one]], "text"
    ]  # fmt: skip
    assert source_of(mapping).fingerprint() == [
        "files", {"train": [stat[one]], "validation": [stat[valid]]}, "text"
    ]  # fmt: skip
    _file(tmp_path / "one.txt", "a b c d\n")  # another size: another fingerprint
    assert source_of(DataConfig(source="files", path=one)).fingerprint()[1][0][1] == 8


def test_data_path_is_one_split_mapping_whatever_was_typed(tmp_path: Path) -> None:
    single = DataConfig(source="files", path="x.txt")
    assert single.path == {"train": "x.txt"}
    assert single == DataConfig(source="files", path={"train": "x.txt"})  # train alone: carved
    fixed = {"train": "a.txt", "validation": "b.txt"}
    assert DataConfig(source="files", path=fixed).path == fixed
    assert DataConfig().path is None and DataConfig(path="").path is None
    # A checkpoint of earlier versions holds the path as typed; one of this version the mapping.
    assert DataConfig(**{**dataclasses.asdict(single), "path": "x.txt"}) == single
    assert DataConfig(**dataclasses.asdict(single)) == single
    with pytest.raises(
        ValueError, match=r"data.path=\['x.txt'\] must be a file, directory or glob"
    ):
        DataConfig(source="files", path=["x.txt"])
    with pytest.raises(ValueError, match=r"data.path.validation='' must be a file"):
        DataConfig(source="files", path={"train": "a.txt", "validation": ""})


def test_cache_keys_of_existing_configs_do_not_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pinned from the code before data.path became a mapping (CACHE_VERSION "1"); the stream
    # tokenizer's is pinned in tests/features/streaming/.
    hub = DataConfig(**WIKITEXT)
    assert (corpus_key(hub), whole_key(hub)) == ("e742c9c174055578", "8684422e4d180750")
    # Files are named by where they are: the key of that code, spelled out.
    monkeypatch.chdir(tmp_path)
    stat = (str(tmp_path.resolve() / "x.txt"), 21, MTIME_NS)
    _file(tmp_path / "x.txt", "some text\n\nmore text\n")
    carving = ("paragraph", 0.05, 0.05, 1234)
    single = DataConfig(source="files", path="x.txt")
    assert corpus_key(single) == stable_hash("corpus", ["files", [stat], "text"], *carving)
    _file(tmp_path / "v.txt", "v\n")
    v_stat = (str(tmp_path.resolve() / "v.txt"), 2, MTIME_NS)
    mapping = DataConfig(source="files", path={"train": "x.txt", "validation": "v.txt"})
    named = {"train": [stat], "validation": [v_stat]}
    assert corpus_key(mapping) == stable_hash("corpus", ["files", named, "text"], *carving)
    assert corpus_key(DataConfig()) == stable_hash(
        "corpus", ["builtin", sys.version], *carving
    )  # fmt: skip


def test_messages_name_a_single_path_as_typed(tmp_path: Path) -> None:
    blank = _file(tmp_path / "blank.txt", "\n  \n\n")
    with pytest.raises(
        ValueError, match=rf"^the files corpus \(data.path='{blank}'\) has no text$"
    ):
        load_corpus(DataConfig(source="files", path=blank))
    split_files = {"train": blank, "validation": _file(tmp_path / "v.txt", "held out\n")}
    with pytest.raises(ValueError, match=rf"^data.path.train={blank} has no text$"):
        ready(DataConfig(source="files", path=split_files, cache_dir=str(tmp_path / "cache")))


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
        (
            {"source": "web"},
            ValueError,
            r"data.source='web'.*\['auto', 'builtin', 'files', 'hub'\]",
        ),
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
