"""Where the pipeline caches its work, the cheap keys that name each cached piece, and the one
way tinylm writes a file that others may be reading (caches, metrics, checkpoints)."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from filelock import FileLock

from data.config import DataConfig

CACHE_ENV = "TINYLM_CACHE"
# Bump when a recipe changes (splitting, tokenizer training, tokenization) so old caches
# are not mistaken for new results.
CACHE_VERSION = "1"


def cache_root(cfg: DataConfig) -> Path:
    """`cfg.cache_dir`, else $TINYLM_CACHE, else ~/.cache/tinylm (read at call time)."""
    root = cfg.cache_dir or os.environ.get(CACHE_ENV) or "~/.cache/tinylm"
    return Path(root).expanduser()


@contextmanager
def prepare_lock(cfg: DataConfig) -> Iterator[Path]:
    """Hold the cache's prepare lock (yields the cache root): processes preparing data in one
    cache at once (parallel sweep jobs, DDP ranks) take turns, so each piece is built once."""
    root = cache_root(cfg)
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock = FileLock(root / "prepare.lock")
        lock.acquire()
    except OSError as err:
        raise ValueError(
            f"the data cache {root} is not writable ({err.strerror or err}): set "
            "data.cache_dir=DIR (or TINYLM_CACHE) to a directory you can write"
        ) from None
    try:
        yield root
    finally:
        lock.release()


def stable_hash(*parts: object) -> str:
    """A short hex digest of JSON-serialisable parts; stable across runs and processes."""
    payload = json.dumps([CACHE_VERSION, *parts], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def write_atomically(path: str | os.PathLike, write: Callable[[BinaryIO], object]) -> Path:
    """Call ``write`` on a temporary file beside ``path``, fsync, then ``os.replace`` it.

    A reader (or a crash mid-write) sees the old file or the new one, never half of one. The
    temporary name is unique, so processes that write the same path at once all succeed, and
    the last one wins. On any error the temporary file is removed and ``path`` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_text_atomically(path: str | os.PathLike, text: str) -> Path:
    return write_atomically(path, lambda f: f.write(text.encode("utf-8")))
