"""What the benchmarks share to launch tinylm: the repository root, the command lines of
``train.py`` and of a benchmark module, and a child process run to its end (a failure ends
the benchmark with the command and the tail of its stderr)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def train_command(overrides: Sequence[str]) -> list[str]:
    """``python train.py OVERRIDES`` with this interpreter."""
    return [sys.executable, str(ROOT / "train.py"), *overrides]


def module_command(module: str, args: Sequence[str]) -> list[str]:
    """``python -m MODULE ARGS`` with this interpreter."""
    return [sys.executable, "-m", module, *args]


def run_child(
    command: Sequence[str], env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``command`` run from the repository root, its output captured; exits on failure."""
    proc = subprocess.run(
        list(command),
        cwd=ROOT,
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(
            f"failed (exit {proc.returncode}): {' '.join(command)}\n{proc.stderr[-3000:]}"
        )
    return proc
