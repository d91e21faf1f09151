"""The token store: per split, ``SPLIT.tokens`` (every document's ids followed by EOS, in the
smallest unsigned type that holds the vocabulary) and ``SPLIT.starts`` (int64 document offsets,
plus the total), with ``meta.json`` (lengths, character and byte counts, checksums); built
aside and renamed into place, checked on open, memory-mapped by every reader
(ARCHITECTURE.md, "Data").
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zlib
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import numpy as np

STORE_VERSION = 1
META_FILE = "meta.json"
_CHUNK = 1 << 24  # bytes per read when checksumming


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned integer type that holds every id below ``vocab_size``."""
    return np.min_scalar_type(vocab_size - 1)


def join_documents(ids: np.ndarray, offsets: np.ndarray, eos_id: int) -> np.ndarray:
    """One token stream: every document (``ids[offsets[i]:offsets[i + 1]]``) then ``eos_id``."""
    return np.insert(ids, offsets[1:], eos_id)


class MappedArray:
    """A read-only 1-D array in a file, mapped on first use in each process.

    It pickles as its path (a DataLoader worker started by spawn maps the file itself instead
    of receiving a copy) and supports what the datasets need: ``len`` and indexing.
    """

    def __init__(self, path: Path, dtype: np.dtype, length: int) -> None:
        self.path = path
        self.dtype = np.dtype(dtype)
        self.length = length
        self._array: np.ndarray | None = None

    @property
    def array(self) -> np.ndarray:
        if self._array is None:
            if self.length == 0:  # mmap cannot map an empty file
                self._array = np.empty(0, dtype=self.dtype)
            else:
                self._array = np.memmap(self.path, self.dtype, "r", shape=(self.length,))
        return self._array

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int | slice) -> np.ndarray:
        return self.array[index]

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_array": None}


@dataclass(frozen=True)
class SplitStore:
    """One split: ``tokens`` (documents each followed by EOS) and ``starts`` (document d is
    ``tokens[starts[d]:starts[d + 1]]``, its last token the EOS); ``chars`` and ``bytes``:
    characters and UTF-8 bytes of text, each document counted with one separator (the EOS),
    for bits per character and per byte. Mapped from a store, or in memory (``memory_split``)."""

    tokens: MappedArray | np.ndarray
    starts: MappedArray | np.ndarray
    chars: int
    bytes: int

    @property
    def chars_per_token(self) -> float:
        return self.chars / len(self.tokens)

    @property
    def bytes_per_token(self) -> float:
        return self.bytes / len(self.tokens)


def text_chars(texts: list[str]) -> int:
    """Characters of ``texts``, each counted with one separator (its EOS)."""
    return sum(map(len, texts)) + len(texts)


def text_bytes(texts: list[str]) -> int:
    """UTF-8 bytes of ``texts``, each counted with a one-byte separator (its EOS, as a newline
    between documents would be): bits per byte compare across tokenizers and alphabets."""
    return sum(len(text.encode("utf-8")) for text in texts) + len(texts)


class SplitWriter:
    """Appends tokenized documents of one split to its files, each followed by EOS."""

    def __init__(self, directory: Path, split: str, dtype: np.dtype, eos_id: int) -> None:
        self.dtype = dtype
        self.limit = np.iinfo(dtype).max
        self.eos_id = eos_id
        self.file = open(directory / f"{split}.tokens", "xb")  # noqa: SIM115 (closed in close)
        self.lengths: list[np.ndarray] = []
        self.tokens = 0
        self.chars = 0
        self.bytes = 0
        self.crc = 0

    def add(self, ids: np.ndarray, offsets: np.ndarray, texts: list[str]) -> None:
        """Write documents (document i is ``ids[offsets[i]:offsets[i + 1]]``, the tokens of
        ``texts[i]``), each followed by EOS."""
        if len(ids) and int(ids.max()) > self.limit:
            raise ValueError(
                f"token id {int(ids.max())} does not fit the store's {self.dtype.name} "
                f"(ids up to {self.limit}): the tokenizer produces ids beyond the vocabulary "
                "size it declares; use a tokenizer whose get_vocab_size() covers every id"
            )
        stream = join_documents(ids.astype(self.dtype), offsets, self.eos_id).tobytes()
        self.file.write(stream)
        self.crc = zlib.crc32(stream, self.crc)
        self.lengths.append(np.diff(offsets) + 1)
        self.tokens += len(ids) + len(texts)
        self.chars += text_chars(texts)
        self.bytes += text_bytes(texts)

    def close(self) -> dict[str, int]:
        """Finish the files; returns the split's entry of meta.json."""
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        lengths = np.concatenate([np.zeros(1, np.int64), *self.lengths])
        starts = np.cumsum(lengths).tobytes()
        path = self.file.name.removesuffix(".tokens") + ".starts"
        with open(path, "xb") as f:
            f.write(starts)
        return {
            "tokens": self.tokens,
            "documents": len(lengths) - 1,
            "chars": self.chars,
            "bytes": self.bytes,
            "tokens_crc32": self.crc,
            "starts_crc32": zlib.crc32(starts),
        }


def open_store(directory: Path) -> dict[str, SplitStore]:
    """The store's splits, after checking that every file is whole; raises ``StoreDamaged``."""
    meta = _read_meta(directory)
    dtype = np.dtype(meta["dtype"])
    splits = {}
    for split, entry in meta["splits"].items():
        # An earlier tinylm's store is rebuilt once; the version stays, so that earlier
        # versions still read the stores this one writes (they ignore the count).
        if "bytes" not in entry:
            raise StoreDamaged(f"{META_FILE} has no byte counts (written before bits per byte)")
        tokens = directory / f"{split}.tokens"
        starts = directory / f"{split}.starts"
        _check_file(tokens, entry["tokens"] * dtype.itemsize, entry["tokens_crc32"])
        _check_file(starts, (entry["documents"] + 1) * 8, entry["starts_crc32"])
        splits[split] = SplitStore(
            MappedArray(tokens, dtype, entry["tokens"]),
            MappedArray(starts, np.dtype(np.int64), entry["documents"] + 1),
            entry["chars"],
            entry["bytes"],
        )
    return splits


class StoreDamaged(Exception):
    """A token store that must not be read: incomplete, truncated or altered."""


def _read_meta(directory: Path) -> dict:
    try:
        meta = json.loads((directory / META_FILE).read_text())
    except (OSError, ValueError) as err:
        raise StoreDamaged(f"{META_FILE} unreadable ({err})") from None
    if meta.get("version") != STORE_VERSION:
        raise StoreDamaged(f"store version {meta.get('version')}, expected {STORE_VERSION}")
    return meta


def _check_file(path: Path, size: int, crc32: int) -> None:
    try:
        actual = path.stat().st_size
    except OSError as err:
        raise StoreDamaged(f"{path.name} missing ({err})") from None
    if actual != size:
        raise StoreDamaged(f"{path.name} holds {actual} bytes, expected {size}")
    crc = 0
    with open(path, "rb") as f:  # read, not mapped: checking adds nothing to this process
        while chunk := f.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
    if crc != crc32:
        raise StoreDamaged(f"{path.name} checksum mismatch (altered since it was written)")


@dataclass
class StoreBuilder:
    """Writes a store into a temporary directory beside ``directory``; ``commit`` renames it
    into place (all or nothing). Use as a context manager: on error nothing is left behind."""

    directory: Path
    vocab_size: int
    eos_id: int

    def __enter__(self) -> StoreBuilder:
        self.directory.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(
            tempfile.mkdtemp(prefix=f".{self.directory.name}-", dir=self.directory.parent)
        )
        self.dtype = token_dtype(self.vocab_size)
        self.writers: dict[str, SplitWriter] = {}
        return self

    def writer(self, split: str) -> SplitWriter:
        if split not in self.writers:
            self.writers[split] = SplitWriter(self.tmp, split, self.dtype, self.eos_id)
        return self.writers[split]

    def commit(self) -> None:
        meta = {
            "version": STORE_VERSION,
            "dtype": self.dtype.name,
            "vocab_size": self.vocab_size,
            "eos_id": self.eos_id,
            "splits": {split: w.close() for split, w in self.writers.items()},
        }
        (self.tmp / META_FILE).write_text(json.dumps(meta, indent=1))
        # An OSError: another process committed the same store first, and it is identical.
        with suppress(OSError):
            os.replace(self.tmp, self.directory)

    def __exit__(self, *exc: object) -> None:
        for writer in self.writers.values():
            writer.file.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
