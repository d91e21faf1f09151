"""Where the pipeline caches its work, and the cheap keys that name each cached piece."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from data.config import DataConfig

CACHE_ENV = "TINYLM_CACHE"
# Bump when a recipe changes (splitting, tokenizer training, tokenization) so old caches
# are not mistaken for new results.
CACHE_VERSION = "1"


def cache_root(cfg: DataConfig) -> Path:
    """`cfg.cache_dir`, else $TINYLM_CACHE, else ~/.cache/tinylm (read at call time)."""
    root = cfg.cache_dir or os.environ.get(CACHE_ENV) or "~/.cache/tinylm"
    return Path(root).expanduser()


def stable_hash(*parts: object) -> str:
    """A short hex digest of JSON-serialisable parts; stable across runs and processes."""
    payload = json.dumps([CACHE_VERSION, *parts], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
