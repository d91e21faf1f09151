"""Raw corpora: the built-in CPython docs, local files, Hub datasets.

Each loader returns a mapping of splits (any of train / validation / test) to datasets of one
column, "text". `source_fingerprint` names a source cheaply (no reading of its contents) so
later stages can find their cached results without loading anything.
"""

from __future__ import annotations

import glob
import os
import sys
from pathlib import Path

import datasets
from datasets import Dataset, DatasetDict, IterableDataset, IterableDatasetDict, load_dataset
from datasets.exceptions import DatasetGenerationError

from data.cache import cache_root
from data.config import SPLITS, DataConfig
from data.hub import hub_unavailable_reason

# File extension -> the `datasets` packaged builder that reads it.
FILE_BUILDERS = {
    ".txt": "text",
    ".text": "text",
    ".json": "json",
    ".jsonl": "json",
    ".csv": "csv",
    ".parquet": "parquet",
}


def load_raw(cfg: DataConfig, streaming: bool = False) -> dict[str, Dataset | IterableDataset]:
    """The configured source: splits (standard names) of one "text" column. Local files are
    always streams (read at each pass, never copied); the built-in corpus is in memory and a
    Hub dataset as the `datasets` cache holds it, or with ``streaming`` both as streams."""
    if cfg.source == "builtin":
        builtin = Dataset.from_dict({"text": builtin_documents()})
        return {"train": builtin.to_iterable_dataset() if streaming else builtin}
    if cfg.source == "files":
        return _load_files(cfg)
    return _load_hub(cfg, streaming)


def source_fingerprint(cfg: DataConfig) -> list[object]:
    """What identifies the source's content, without reading it.

    Files are named by path, size and mtime; the built-in corpus by the Python build; Hub
    datasets by name and config only (delete the cache directory to pick up a new revision).
    """
    if cfg.source == "builtin":
        return ["builtin", sys.version]
    if cfg.source == "files":
        stats = {
            split: [(str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files]
            for split, files in split_files(cfg).items()
        }
        # A single path keeps the key of earlier versions: their caches stay valid.
        return ["files", stats if isinstance(cfg.path, dict) else stats["train"], cfg.text_column]
    return ["hub", cfg.name, cfg.config_name, cfg.text_column]


def builtin_documents() -> list[str]:
    """CPython's reference documentation (one document per topic), shipped with every install."""
    from pydoc_data.topics import topics

    return [topics[key] for key in sorted(topics)]


def split_files(cfg: DataConfig) -> dict[str, list[Path]]:
    """The files of each split: those data.path maps to it, or all of them under "train"."""
    paths = cfg.path if isinstance(cfg.path, dict) else {"train": cfg.path or ""}
    return {split: resolve_files(path) for split, path in paths.items()}


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
    builders = {FILE_BUILDERS[f.suffix.lower()] for f in files}
    if len(builders) > 1:
        raise ValueError(
            f"data.path={path!r} mixes formats {sorted(builders)}; point it at files of one format"
        )
    return files


def _supported(file: Path) -> bool:
    return file.suffix.lower() in FILE_BUILDERS


def _load_files(cfg: DataConfig) -> dict[str, IterableDataset]:
    files = split_files(cfg)
    builders = {FILE_BUILDERS[f.suffix.lower()] for split in files.values() for f in split}
    if len(builders) > 1:
        raise ValueError(
            f"data.path={cfg.path} mixes formats {sorted(builders)}; use files of one format"
        )
    builder = builders.pop()
    options = {}
    if builder == "text":
        # The text builder names its column "text" and can cut examples itself.
        options["sample_by"] = cfg.example_unit
    # Streamed: read from the files at each pass, never copied into an Arrow cache.
    try:
        raw = load_dataset(
            builder,
            data_files={split: [str(f) for f in fs] for split, fs in files.items()},
            streaming=True,
            **options,
        )
    except (DatasetGenerationError, ValueError) as err:  # pyarrow's and pandas' parse errors
        raise ValueError(f"cannot read data.path={cfg.path}: {err.__cause__ or err}") from None
    column = "text" if builder == "text" else cfg.text_column
    return _text_only(raw, column, f"data.path={cfg.path!r}")


def _load_hub(cfg: DataConfig, streaming: bool) -> dict[str, Dataset | IterableDataset]:
    what = cfg.name if cfg.config_name is None else f"{cfg.name} ({cfg.config_name})"
    hint = (
        f"cannot load Hub dataset {what}: the Hugging Face Hub is {{why}}. Download its files "
        "elsewhere and use them locally with `data=text data.path=FILE_DIR_OR_GLOB` "
        "(.txt/.json/.jsonl/.csv/.parquet), or, if it is already in the Hugging Face cache "
        "under the data cache directory, set HF_DATASETS_OFFLINE=1 before starting."
    )
    # With offline mode on at import, `datasets` reads its cache without the network;
    # otherwise it would retry an unreachable Hub for minutes, so decide up front.
    if not datasets.config.HF_HUB_OFFLINE and (why := hub_unavailable_reason()):
        raise ConnectionError(hint.format(why=why))
    try:
        raw = load_dataset(
            cfg.name, cfg.config_name, cache_dir=str(cache_root(cfg) / "hf"), streaming=streaming
        )
    except ConnectionError as err:
        raise ConnectionError(hint.format(why=f"not usable ({err})")) from err
    return _text_only(raw, cfg.text_column, f"Hub dataset {what}")


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
    try:
        return list(next(iter(stream)))
    except StopIteration:
        raise ValueError(f"{what} holds no record; check the file") from None
    except (DatasetGenerationError, ValueError) as err:
        raise ValueError(f"cannot read {what}: {err.__cause__ or err}") from None
