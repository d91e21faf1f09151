"""Decide quickly whether the Hugging Face Hub can be used, instead of waiting on retries."""

from __future__ import annotations

import os
import socket
from urllib.parse import urlparse

# Long enough for a slow network, short enough that an unreachable Hub fails "within seconds".
HUB_PROBE_TIMEOUT_S = 3.0
_TRUTHY = {"1", "ON", "YES", "TRUE"}
_OFFLINE_VARS = ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")


def hub_unavailable_reason() -> str | None:
    """Why the Hub cannot be used now, or None if it answers. The environment is read at call
    time (the HF libraries read it once, at import)."""
    if any(os.environ.get(v, "").upper() in _TRUTHY for v in _OFFLINE_VARS):
        return "switched off (HF_DATASETS_OFFLINE / HF_HUB_OFFLINE is set)"
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        with socket.create_connection((endpoint.hostname, port), timeout=HUB_PROBE_TIMEOUT_S):
            return None
    except OSError as err:
        return f"unreachable from this machine ({err})"
