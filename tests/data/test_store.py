"""The token store: built once, memory-mapped, checked, rebuilt when damaged; the lean cache;
parallel tokenization giving the same store."""

from __future__ import annotations

import logging
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

import data.tokenize
from data.config import DataConfig
from data.corpus import Corpus
from data.datamodule import prepare, prepared_datamodule
from data.examples import PackedBlocks
from data.store import (
    StoreBuilder,
    StoreDamaged,
    join_documents,
    open_store,
    token_dtype,
)
from tests.corpora import small_cfg


def test_join_documents_puts_eos_after_each_document() -> None:
    ids = np.array([1, 2, 3, 4, 5, 6], dtype=np.int32)
    offsets = np.array([0, 2, 2, 6])  # documents [1, 2], [], [3, 4, 5, 6]
    assert join_documents(ids, offsets, eos_id=9).tolist() == [1, 2, 9, 9, 3, 4, 5, 6, 9]


@pytest.mark.parametrize(
    ("vocab_size", "dtype"),
    [(100, np.uint8), (256, np.uint8), (257, np.uint16), (65536, np.uint16), (65537, np.uint32)],
)
def test_token_dtype_is_the_smallest_that_holds_the_vocabulary(vocab_size: int, dtype) -> None:
    assert token_dtype(vocab_size) == np.dtype(dtype)


def _store_dir(cfg: DataConfig) -> Path:
    (directory,) = (Path(cfg.cache_dir or "") / "tokens").iterdir()
    return directory


@pytest.mark.parametrize(("kind", "dtype"), [("bpe", np.uint16), ("char", np.uint8)])
def test_store_holds_every_document_then_eos_in_source_order(
    tmp_path: Path, kind: str, dtype
) -> None:
    cfg = small_cfg(tmp_path, tokenizer=kind)
    prepared = prepare(cfg, "decoder")
    eos = prepared.specials.eos_id
    for split, texts in _texts(cfg).items():
        store = prepared.stores[split]
        expected = [t for text in texts for t in [*prepared.tokenizer.encode(text).ids, eos]]
        assert store.tokens.dtype == np.dtype(dtype)
        assert store.tokens[:].tolist() == expected
        lengths = [len(prepared.tokenizer.encode(text).ids) + 1 for text in texts]
        assert np.diff(store.starts[:]).tolist() == lengths
        assert store.chars == sum(map(len, texts)) + len(texts)


def _texts(cfg: DataConfig) -> dict[str, list[str]]:
    texts: dict[str, list[str]] = {}
    for split, batch in Corpus(cfg).batches():
        texts.setdefault(split, []).extend(batch)
    return texts


def test_readers_map_the_store_instead_of_copying_it(tmp_path: Path) -> None:
    dm = prepared_datamodule(small_cfg(tmp_path), "decoder", 16, seed=0, stage="fit")
    store = dm.prepared.stores["train"]
    assert isinstance(store.tokens.array, np.memmap)
    # A DataLoader worker started by spawn receives the dataset pickled: the path, not the data.
    blocks = dm.dataset("train")
    assert len(pickle.dumps(blocks)) < 1000 < len(store.tokens) * store.tokens.dtype.itemsize
    again = pickle.loads(pickle.dumps(blocks))
    assert all(np.array_equal(again[i], blocks[i]) for i in range(len(blocks)))
    assert isinstance(PackedBlocks(store.tokens, 17)[0], np.ndarray)


def test_cache_keeps_only_the_tokenizer_and_the_store(tmp_path: Path) -> None:
    cfg = small_cfg(tmp_path)
    prepare(cfg, "decoder")
    cache = Path(cfg.cache_dir or "")
    assert sorted(p.name for p in cache.iterdir()) == ["prepare.lock", "tokenizers", "tokens"]
    text_bytes = Path(cfg.path["train"]).stat().st_size
    store_bytes = sum(p.stat().st_size for p in (cache / "tokens").rglob("*") if p.is_file())
    assert store_bytes < 1.5 * text_bytes


def test_parallel_tokenization_writes_the_same_store(tmp_path: Path) -> None:
    serial = small_cfg(tmp_path, num_proc=1)
    parallel = small_cfg(tmp_path, num_proc=2, cache_dir=str(tmp_path / "parallel"))
    prepare(serial, "decoder")
    prepare(parallel, "decoder")
    for name in ("train.tokens", "validation.starts", "meta.json"):
        a, b = _store_dir(serial) / name, _store_dir(parallel) / name
        assert a.read_bytes() == b.read_bytes(), name


def test_default_workers_follow_the_cores_for_large_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = small_cfg(tmp_path, num_proc=None)
    assert data.tokenize.tokenize_workers(cfg) == 1  # a few KB: not worth a process
    monkeypatch.setattr(data.tokenize, "PARALLEL_MIN_BYTES", 1)
    assert data.tokenize.tokenize_workers(cfg) == len(__import__("os").sched_getaffinity(0))
    assert data.tokenize.tokenize_workers(small_cfg(tmp_path, num_proc=3)) == 3


def _damage_truncate(directory: Path) -> None:
    path = directory / "train.tokens"
    path.write_bytes(path.read_bytes()[:-2])


def _damage_flip(directory: Path) -> None:
    path = directory / "train.tokens"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))


def _damage_meta(directory: Path) -> None:
    (directory / "meta.json").write_text('{"version": 1, "spl')


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (_damage_truncate, "holds .* bytes, expected"),
        (_damage_flip, "checksum mismatch"),
        (_damage_meta, "meta.json unreadable"),
    ],
)
def test_a_damaged_store_is_detected_and_rebuilt_never_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage, reason: str
) -> None:
    cfg = small_cfg(tmp_path)
    good = prepare(cfg, "decoder").stores["train"].tokens[:].copy()
    directory = _store_dir(cfg)
    damage(directory)
    with pytest.raises(StoreDamaged, match=reason):
        open_store(directory)
    with caplog.at_level(logging.WARNING):
        rebuilt = prepare(cfg, "decoder").stores["train"].tokens[:]
    assert "is damaged" in caplog.text and "building it again" in caplog.text
    assert np.array_equal(rebuilt, good)


def test_a_killed_build_leaves_nothing_that_is_read_and_is_cleaned_up(tmp_path: Path) -> None:
    cfg = small_cfg(tmp_path)
    good = prepare(cfg, "decoder").stores["train"].tokens[:].copy()
    directory = _store_dir(cfg)
    unfinished = directory.parent / f".{directory.name}-killed"
    unfinished.mkdir()
    (unfinished / "train.tokens").write_bytes(b"\x00" * 10)  # no meta.json: never committed
    shutil.rmtree(directory)
    assert np.array_equal(prepare(cfg, "decoder").stores["train"].tokens[:], good)
    assert [p.name for p in directory.parent.iterdir()] == [directory.name]


@pytest.mark.parametrize(
    ("vocab_size", "bad_id", "dtype"), [(256, 300, "uint8"), (65536, 70000, "uint16")]
)
def test_token_ids_beyond_the_declared_type_are_refused(
    tmp_path: Path, vocab_size: int, bad_id: int, dtype: str
) -> None:
    target = tmp_path / "tokens" / "store"
    message = rf"token id {bad_id} does not fit the store's {dtype}"
    with pytest.raises(ValueError, match=message), StoreBuilder(target, vocab_size, 0) as builder:
        builder.writer("train").add(np.array([5, bad_id]), np.array([0, 2]), ["ab"])
        builder.commit()
    assert list((tmp_path / "tokens").iterdir()) == []  # nothing half-written is left


def test_an_unwritable_cache_is_one_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    cfg = small_cfg(tmp_path, cache_dir=str(blocker / "cache"))
    with pytest.raises(
        ValueError, match=r"the data cache .*a-file/cache is not writable.*data\.cache_dir"
    ):
        prepare(cfg, "decoder")
