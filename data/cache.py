"""Where the pipeline caches its work, and the lock that lets processes share the cache."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock

CACHE_ENV = "TINYLM_CACHE"


def cache_root(cache_dir: str | None) -> Path:
    """`cache_dir` (data.cache_dir), else $TINYLM_CACHE, else ~/.cache/tinylm (read at call
    time)."""
    root = cache_dir or os.environ.get(CACHE_ENV) or "~/.cache/tinylm"
    return Path(root).expanduser()


@contextmanager
def prepare_lock(cache_dir: str | None) -> Iterator[Path]:
    """Hold the cache's prepare lock (yields the cache root): processes preparing data in one
    cache at once (parallel sweep jobs, DDP ranks) take turns, so each piece is built once."""
    root = cache_root(cache_dir)
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
