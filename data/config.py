"""`DataConfig`: the Hydra group `data`, one flat dataclass that checks itself on creation."""

from __future__ import annotations

from dataclasses import InitVar, dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

from data.sources import (
    AUTO,
    BuiltinSource,
    check_source,
    keys_read,
    kind_keys,
    kind_named,
    kinds_reading,
    split_paths,
)

TOKENIZER_KINDS = ("bpe", "wordpiece", "char")
EXAMPLE_UNITS = ("document", "paragraph", "line")
EVAL_SPLITS = ("validation", "test")
# BPE starts from the 256-byte alphabet; below this there is no room for any merge.
MIN_VOCAB_SIZE = 300


@dataclass
class DataConfig:
    """Where the text comes from, how it is tokenized and how it is batched (docs/data.md).

    source: auto resolves here to files (`path` given), hub (`name` given) or builtin, so a
    built config always holds its kind; a source key the kind does not read is refused.
    path: once built, a mapping of split names to paths (or None): a single path P is
    `{train: P}`, carved; a mapping with validation names fixed splits.
    tokenizer: None picks the architecture's default (decoder -> bpe, encoder -> wordpiece);
    else a kind, a tokenizer.json (or a directory holding one), or a Hub name "org/name".
    tokenizer_sample_bytes: in bytes, not examples, because bytes are what tokenizer
    training's time and memory grow with, and a local source's size is known unread
    (data/tokenizer_sample.py).
    num_proc: tokenization processes; None -> the cores this process may use.
    cache_dir: None -> $TINYLM_CACHE or ~/.cache/tinylm.
    streaming, stream_val_examples: read by the streaming feature (features/streaming/).
    document_mask: decoders only; a token attends only to its own document in a packed block.
    """

    source: str = AUTO
    path: dict[str, str] | str | None = None
    name: str | None = None
    config_name: str | None = None
    text_column: str = "text"
    tokenizer: str | None = None
    vocab_size: int = 2048
    tokenizer_sample_bytes: int = 32_000_000
    example_unit: str = "paragraph"
    mlm_probability: float = 0.15
    batch_size: int = 32
    num_workers: int = 0
    num_proc: int | None = None
    cache_dir: str | None = None
    split: str = "validation"
    val_fraction: float = 0.05
    test_fraction: float = 0.05
    split_seed: int = 1234
    streaming: bool = False
    stream_val_examples: int = 1000
    document_mask: bool = False
    # Retired (tokenizer_sample_bytes replaced it): accepted so that the data_config of older
    # checkpoints loads, and dropped (their tokenizer travels with them); on a command line it
    # is named with its replacement (RETIRED_KEYS, read by conf.command_line).
    stream_tokenizer_examples: InitVar[int | None] = None
    RETIRED_KEYS: ClassVar[dict[str, str]] = {
        "stream_tokenizer_examples": "data.tokenizer_sample_bytes=BYTES, the tokenizer's sample"
    }

    def __post_init__(self, stream_tokenizer_examples: int | None) -> None:
        self.path = split_paths(self.path)
        if self.source == AUTO:
            given = [key for key in kind_keys() if getattr(self, key)]
            self.source = kind_named(given) or BuiltinSource.name
        check_source(self)
        self._check_keys_read()
        _check_choice("example_unit", self.example_unit, EXAMPLE_UNITS)
        _check_choice("split", self.split, EVAL_SPLITS)
        if not self.text_column:
            raise ValueError("data.text_column must name a column, got an empty string")
        _check_int("batch_size", self.batch_size, minimum=1)
        _check_int("num_workers", self.num_workers, minimum=0)
        if self.num_proc is not None:
            _check_int("num_proc", self.num_proc, minimum=1)
        _check_bool("streaming", self.streaming)
        _check_bool("document_mask", self.document_mask)
        _check_int("stream_val_examples", self.stream_val_examples, minimum=1)
        _check_int("tokenizer_sample_bytes", self.tokenizer_sample_bytes, minimum=1)
        _check_int("vocab_size", self.vocab_size, minimum=MIN_VOCAB_SIZE)
        _check_int("split_seed", self.split_seed, minimum=0)
        _check_fraction("mlm_probability", self.mlm_probability, high=1.0)
        _check_fraction("val_fraction", self.val_fraction, high=0.5)
        _check_fraction("test_fraction", self.test_fraction, high=0.5)
        if self.tokenizer is not None:
            check_tokenizer_spec(self.tokenizer)

    def _check_keys_read(self) -> None:
        """No source key that the chosen kind does not read, so none is silently ignored."""
        reads = keys_read(self.source)
        defaults = {f.name: f.default for f in fields(self)}
        for key in sorted(kind_keys() - set(reads)):
            value = getattr(self, key)
            if value == defaults[key]:
                continue
            shown = value.get("train") if isinstance(value, dict) and len(value) == 1 else value
            readers = " or ".join(f"data.source={kind}" for kind in kinds_reading(key))
            raise ValueError(
                f"data.{key}={shown} is not read by data.source={self.source}, which reads "
                f"{', '.join(f'data.{k}' for k in reads) or 'no source key'}; data.{key} is "
                f"read by {readers}: give that (data.source=auto, the default, picks it from "
                "data.path or data.name), or drop the key"
            )


def check_tokenizer_spec(spec: str) -> None:
    """Raise unless `spec` is a tokenizer kind, an existing tokenizer.json, or a Hub name."""
    if spec in TOKENIZER_KINDS:
        return
    path = Path(spec).expanduser()
    if spec.endswith(".json") or path.exists():
        if not (path.is_file() or (path / "tokenizer.json").is_file()):
            raise FileNotFoundError(
                f"data.tokenizer={spec!r}: no such tokenizer.json; pass an existing file "
                f"(e.g. a run directory's tokenizer.json) or one of {list(TOKENIZER_KINDS)}"
            )
        return
    if "/" not in spec:
        # A bare word is a typo of a kind far more often than a Hub name without an org.
        raise ValueError(
            f"data.tokenizer={spec!r} is not a tokenizer kind; choose one of "
            f"{list(TOKENIZER_KINDS)}, a path to tokenizer.json, or a Hub name 'org/name'"
        )


def _check_choice(key: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"data.{key}={value!r} is not valid; choose one of {list(choices)}")


def _check_int(key: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"data.{key}={value!r} must be an integer >= {minimum}")


def _check_bool(key: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"data.{key}={value!r} must be true or false")


def _check_fraction(key: str, value: Any, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < high:
        raise ValueError(f"data.{key}={value!r} must be a number strictly between 0 and {high}")
