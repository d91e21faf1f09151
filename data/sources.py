"""The kinds of data source (`data.source`): the built-in CPython docs, local files, Hub datasets.

One class per kind owns everything that differs between sources (ARCHITECTURE.md, "Add a data
source"); `source_of(cfg)` picks it. Defining a subclass with `name=...` adds a `data.source`
choice, and one that lacks a method fails at its definition. `datasets` is imported only where
a source is read: `data.config` validates through this module at every start, and that import
takes most of a second.
"""

from __future__ import annotations

import glob
import inspect
import os
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from data.cache import cache_root
from data.hub import hub_unavailable_reason

if TYPE_CHECKING:
    from datasets import Dataset, DatasetDict, IterableDataset, IterableDatasetDict

SPLITS = ("train", "validation", "test")
# data.source=auto: the kind that data.path or data.name names, else the built-in corpus.
AUTO = "auto"


class DataSettings(Protocol):
    """The ``data.*`` keys a source reads (``data.config.DataConfig`` has them; this module
    sits below it, so it names what it reads instead of importing it)."""

    source: str
    path: dict[str, str] | str | None
    name: str | None
    config_name: str | None
    text_column: str
    example_unit: str
    cache_dir: str | None


# File extension -> the `datasets` packaged builder that reads it.
FILE_BUILDERS = {
    ".txt": "text",
    ".text": "text",
    ".json": "json",
    ".jsonl": "json",
    ".csv": "csv",
    ".parquet": "parquet",
}
# Every kind of source by its data.source name, in the order they are defined.
SOURCES: dict[str, type[Source]] = {}


class Source(ABC):
    """One kind of source, for one (validated) config."""

    name: ClassVar[str]
    # The data.* keys that say where this kind's text comes from (on a mode=eval command
    # line they name the text to score), and the one of them it cannot do without.
    keys: ClassVar[tuple[str, ...]] = ()
    required_key: ClassVar[str | None] = None
    # How to give the required key, for the line that asks for it.
    required_hint: ClassVar[str] = ""

    def __init_subclass__(cls, name: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # At the definition, not at the first use: ABC would refuse only to build one.
        missing = sorted(
            attr
            for attr in dir(cls)
            if getattr(inspect.getattr_static(cls, attr), "__isabstractmethod__", False)
        )
        if missing:
            raise TypeError(f"the source kind {name!r} must define {', '.join(missing)}")
        cls.name = name
        SOURCES[name] = cls

    def __init__(self, cfg: DataSettings) -> None:
        self.cfg = cfg

    def check(self) -> None:
        """Raise unless the config has what this kind needs (run when a DataConfig is built)."""
        key = self.required_key
        if key and not getattr(self.cfg, key):
            raise ValueError(
                f"data.{key} is required with data.source={self.name}: pass {self.required_hint}"
            )

    @abstractmethod
    def load(self, streaming: bool = False) -> dict[str, Dataset | IterableDataset]:
        """Splits (standard names) of one "text" column; with ``streaming``, as streams."""

    @abstractmethod
    def fingerprint(self) -> list[object]:
        """What identifies the content, without reading it (part of every cache key)."""

    @property
    @abstractmethod
    def display_name(self) -> str:
        """The source as the user named it (records, messages)."""

    @property
    def has_own_splits(self) -> bool:
        """Whether its splits are its own: scored whole, ``data.split`` picks one of them."""
        return False

    @property
    def carves_missing_splits(self) -> bool:
        """Whether the splits it lacks are carved from its train split."""
        return True

    @abstractmethod
    def size_bytes(self) -> int | None:
        """Its text's size, where that is known without reading it."""

    @abstractmethod
    def no_text(self, split: str | None = None) -> str:
        """The error when it (or its ``split``) holds no text."""


def source_of(cfg: DataSettings) -> Source:
    """The source ``cfg`` names (``cfg`` is validated, so its kind exists)."""
    return SOURCES[cfg.source](cfg)


def check_source(cfg: DataSettings) -> None:
    """``data.source`` is a defined kind, and ``cfg`` has what that kind needs."""
    if cfg.source not in SOURCES:
        raise ValueError(
            f"data.source={cfg.source!r} is not valid; choose one of {[AUTO, *SOURCES]}"
        )
    source_of(cfg).check()


def source_keys() -> set[str]:
    """The data.* keys that say where text comes from, whatever the source."""
    return {"source", "example_unit", *kind_keys()}


def kind_keys() -> set[str]:
    """The data.* keys that only some kinds of source read (path, name, ...)."""
    return {key for kind in SOURCES.values() for key in kind.keys}


def keys_read(kind: str) -> tuple[str, ...]:
    """The data.* keys beyond ``source`` and ``example_unit`` that the kind ``kind`` reads."""
    return SOURCES[kind].keys


def kinds_reading(key: str) -> list[str]:
    """The kinds of source that read ``data.KEY``."""
    return [kind.name for kind in SOURCES.values() if key in kind.keys]


def kind_named(keys: Iterable[str]) -> str | None:
    """The kind whose indispensable key is among ``keys`` (data.path: files, data.name: hub),
    None when none is; keys that name two kinds are refused."""
    keys = set(keys)
    named = [kind.name for kind in SOURCES.values() if kind.required_key in keys]
    if len(named) > 1:
        given = ", ".join(f"data.{SOURCES[kind].required_key}" for kind in named)
        raise ValueError(
            f"{given} name different kinds of source; add data.source={' or '.join(named)} "
            "to say which to read"
        )
    return named[0] if named else None


def split_paths(path: object) -> dict[str, str] | None:
    """``data.path`` as one mapping of split names to paths: a single path P is {train: P}
    (the other splits carved from it), and so is a mapping of train alone; any other mapping
    names fixed splits, train and validation at least. None (or an empty path) stays None."""
    if not path:
        return None
    if isinstance(path, str):
        return {"train": path}
    if not isinstance(path, dict):
        raise ValueError(
            f"data.path={path!r} must be a file, directory or glob, or a mapping of split names "
            "to them, e.g. data.path={train: a.txt, validation: b.txt}"
        )
    unknown = [k for k in path if k not in SPLITS]
    missing = [k for k in ("train", "validation") if k not in path]
    if unknown or (missing and set(path) != {"train"}):
        raise ValueError(
            f"data.path={dict(path)} maps split names to files: use the keys "
            f"{', '.join(SPLITS)} (train and validation required, test optional; train alone "
            "is a single path, carved), e.g. data.path={train: a.txt, validation: b.txt, "
            "test: c.txt}"
        )
    for split, value in path.items():
        if not isinstance(value, str) or not value:
            raise ValueError(f"data.path.{split}={value!r} must be a file, directory or glob")
    return dict(path)


class BuiltinSource(Source, name="builtin"):
    """CPython's reference documentation, shipped with every install: always available."""

    def load(self, streaming: bool = False) -> dict[str, Dataset | IterableDataset]:
        from datasets import Dataset

        builtin = Dataset.from_dict({"text": builtin_documents()})
        return {"train": builtin.to_iterable_dataset() if streaming else builtin}

    def fingerprint(self) -> list[object]:
        return ["builtin", sys.version]  # the docs change with the Python build

    @property
    def display_name(self) -> str:
        return "builtin"

    def size_bytes(self) -> int:
        return sum(len(text.encode()) for text in builtin_documents())

    def no_text(self, split: str | None = None) -> str:
        return "the builtin corpus has no text" + _in_split(split)


def builtin_documents() -> list[str]:
    """CPython's reference documentation (one document per topic), shipped with every install."""
    from pydoc_data.topics import topics

    return [topics[key] for key in sorted(topics)]


class FilesSource(Source, name="files"):
    """Local files: ``data.path`` is one path (a file, a directory or a glob; the splits are
    carved from it), or a mapping of split names to such paths (fixed splits)."""

    keys = ("path", "text_column")
    required_key = "path"
    required_hint = "data.path=FILE (a .txt/.json/.jsonl/.csv/.parquet file, a directory or a glob)"

    @property
    def paths(self) -> dict[str, str]:
        return self.cfg.path or {}

    @property
    def typed(self) -> str | dict[str, str]:
        """``data.path`` as the user typed it: the one path, or the mapping."""
        return self.paths if self.has_own_splits else self.paths["train"]

    def load(self, streaming: bool = False) -> dict[str, IterableDataset]:
        """Always streams: read from the files at each pass, never copied into an Arrow cache."""
        from datasets import load_dataset
        from datasets.exceptions import DatasetGenerationError

        files = self.files()
        builders = {FILE_BUILDERS[f.suffix.lower()] for split in files.values() for f in split}
        if len(builders) > 1:
            raise ValueError(
                f"data.path={self.typed} mixes formats {sorted(builders)}; use files of one format"
            )
        builder = builders.pop()
        # The text builder names its column "text" and can cut examples itself.
        options = {"sample_by": self.cfg.example_unit} if builder == "text" else {}
        try:
            raw = load_dataset(
                builder,
                data_files={split: [str(f) for f in fs] for split, fs in files.items()},
                streaming=True,
                **options,
            )
        except (DatasetGenerationError, ValueError) as err:  # pyarrow's and pandas' parse errors
            cause = err.__cause__ or err
            raise ValueError(f"cannot read data.path={self.typed}: {cause}") from None
        column = "text" if builder == "text" else self.cfg.text_column
        return _text_only(raw, column, f"data.path={self.typed!r}")

    def fingerprint(self) -> list[object]:
        """Named by path, size and mtime of every file."""
        stats = {
            split: [(str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files]
            for split, files in self.files().items()
        }
        # A single path keeps the key of earlier versions: their caches stay valid.
        named = stats if self.has_own_splits else stats["train"]
        return ["files", named, self.cfg.text_column]

    @property
    def display_name(self) -> str:
        return str(self.typed)

    @property
    def has_own_splits(self) -> bool:
        return "validation" in self.paths

    @property
    def carves_missing_splits(self) -> bool:
        return not self.has_own_splits  # fixed split files: a split not given is not there

    def files(self) -> dict[str, list[Path]]:
        """The files of each split."""
        return {split: resolve_files(path) for split, path in self.paths.items()}

    def size_bytes(self) -> int:
        return sum(f.stat().st_size for files in self.files().values() for f in files)

    def no_text(self, split: str | None = None) -> str:
        if split is not None and self.has_own_splits:
            return f"data.path.{split}={self.paths[split]} has no text"
        return f"the files corpus (data.path={self.typed!r}) has no text" + _in_split(split)


def resolve_files(path: str) -> list[Path]:
    """A file, a directory (searched recursively) or a glob -> sorted files of one format."""
    target = Path(path).expanduser()
    if target.is_file() and target.stat().st_size == 0:
        # Named here, before the datasets library trips over it with a stack trace.
        raise ValueError(
            f"data.path={path} is an empty file: the corpus has no text. Point data.path at a "
            "file (or directory, or glob) with text in it"
        )
    if target.is_file():
        files = [target]
    elif target.is_dir():
        files = sorted(f for f in target.rglob("*") if f.is_file() and _supported(f))
    elif glob.has_magic(path):
        files = sorted(Path(f) for f in glob.glob(os.path.expanduser(path), recursive=True))
        files = [f for f in files if f.is_file()]
    else:
        raise FileNotFoundError(f"data.path={path!r}: no such file or directory")
    if not files:
        raise FileNotFoundError(
            f"data.path={path!r} matches no data files; expected {sorted(FILE_BUILDERS)} files"
        )
    unsupported = [str(f) for f in files if not _supported(f)]
    if unsupported:
        raise ValueError(
            f"data.path={path!r}: unsupported file type(s) {unsupported[:3]}; "
            f"supported extensions: {sorted(FILE_BUILDERS)}"
        )
    return files


def _supported(file: Path) -> bool:
    return file.suffix.lower() in FILE_BUILDERS


class HubSource(Source, name="hub"):
    """A Hugging Face Hub dataset (``data.name``, ``data.config_name``), through the
    `datasets` cache under the data cache directory."""

    keys = ("name", "config_name", "text_column")
    required_key = "name"
    required_hint = "data.name=ORG/DATASET (and data.config_name=CONFIG if the dataset has configs)"

    def load(self, streaming: bool = False) -> dict[str, Dataset | IterableDataset]:
        import datasets
        from datasets import load_dataset

        cfg = self.cfg
        what = cfg.name if cfg.config_name is None else f"{cfg.name} ({cfg.config_name})"
        hint = (
            f"cannot load Hub dataset {what}: the Hugging Face Hub is {{why}}. Download its "
            "files elsewhere and use them locally with `data=text data.path=FILE_DIR_OR_GLOB` "
            "(.txt/.json/.jsonl/.csv/.parquet), or, if it is already in the Hugging Face cache "
            "under the data cache directory, set HF_DATASETS_OFFLINE=1 before starting."
        )
        # With offline mode on at import, `datasets` reads its cache without the network;
        # otherwise it would retry an unreachable Hub for minutes, so decide up front.
        if not datasets.config.HF_HUB_OFFLINE and (why := hub_unavailable_reason()):
            raise ConnectionError(hint.format(why=why))
        try:
            raw = load_dataset(
                cfg.name,
                cfg.config_name,
                cache_dir=str(cache_root(cfg.cache_dir) / "hf"),
                streaming=streaming,
            )
        except ConnectionError as err:
            raise ConnectionError(hint.format(why=f"not usable ({err})")) from err
        return _text_only(raw, cfg.text_column, f"Hub dataset {what}")

    def fingerprint(self) -> list[object]:
        """By name and config only: delete the cache directory to pick up a new revision."""
        return ["hub", self.cfg.name, self.cfg.config_name, self.cfg.text_column]

    @property
    def display_name(self) -> str:
        return f"{self.cfg.name}" + (f"/{self.cfg.config_name}" if self.cfg.config_name else "")

    @property
    def has_own_splits(self) -> bool:
        return True

    def size_bytes(self) -> None:
        return None  # known only once downloaded

    def no_text(self, split: str | None = None) -> str:
        return f"the Hub dataset {self.display_name} has no text" + _in_split(split)


def _in_split(split: str | None) -> str:
    return "" if split is None else f" in its {split} split"


def _text_only(
    raw: DatasetDict | IterableDatasetDict, column: str, what: str
) -> dict[str, Dataset | IterableDataset]:
    """Keep the standard splits and only the text column, renamed to "text"."""
    if "train" not in raw:
        raise ValueError(f"{what} has no 'train' split; its splits are {list(raw)}")
    columns = raw["train"].column_names or _first_record_columns(raw["train"], what)
    if column not in columns:
        raise ValueError(
            f"data.text_column={column!r} is not a column of {what}; its columns are {columns}. "
            "Pass data.text_column=NAME"
        )
    kept = {}
    for split in SPLITS:
        if split in raw:
            ds = raw[split].select_columns([column])
            kept[split] = ds.rename_column(column, "text") if column != "text" else ds
    return kept


def _first_record_columns(stream: IterableDataset, what: str) -> list[str]:
    """The columns of a stream that does not declare them (CSV): those of its first record."""
    from datasets.exceptions import DatasetGenerationError

    try:
        return list(next(iter(stream)))
    except StopIteration:
        raise ValueError(f"{what} holds no record; check the file") from None
    except (DatasetGenerationError, ValueError) as err:
        raise ValueError(f"cannot read {what}: {err.__cause__ or err}") from None
