"""Atomic file writes, for files that others may be reading, and stable short hashes."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

# Bump when a recipe changes (splitting, tokenizer training, tokenization) so old caches
# are not mistaken for new results.
CACHE_VERSION = "1"


def stable_hash(*parts: object) -> str:
    """A short hex digest of JSON-serialisable parts; stable across runs and processes."""
    payload = json.dumps([CACHE_VERSION, *parts], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def write_atomically(path: str | os.PathLike, write: Callable[[BinaryIO], object]) -> Path:
    """Call ``write`` on a temporary file beside ``path``, fsync, then ``os.replace`` it: a
    reader (or a crash) sees the old file or the new one, never half of one, and writers of
    the same path at once all succeed (the last one wins)."""
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
