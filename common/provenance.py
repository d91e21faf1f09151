"""What produced a result: the code version, the library versions, the device, the precision
and the command line, recorded in every run's record and every evaluation record."""

from __future__ import annotations

import functools
import hashlib
import platform
import shlex
import subprocess
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

UNKNOWN = "unknown"
NOT_RECORDED = "no provenance recorded"  # a run from before provenance existed
LIBRARIES = ("torch", "lightning", "tokenizers", "datasets", "transformers")
# The checkout whose code ran: the directory above common/.
CODE_ROOT = Path(__file__).resolve().parents[1]
_GIT_SECONDS = 20  # a git command that takes longer (a hung mount) leaves the version unknown


def provenance(precision: str | None, accelerator: str = "cpu") -> dict[str, Any]:
    """This process's provenance, with the ``precision`` used and ``accelerator``'s device."""
    return {
        "code": code_version(),
        "versions": library_versions(),
        "device": device_name(accelerator),
        "precision": precision or UNKNOWN,
        "command": shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else UNKNOWN,
    }


@functools.cache
def code_version(root: Path = CODE_ROOT) -> dict[str, Any]:
    """{commit, dirty, diff_hash} of the git checkout at ``root``; ``unknown`` for each when
    it is no checkout or git is missing. diff_hash: of the diff against the commit and the
    untracked files' names and bytes (None for a clean tree)."""
    commit = _git(root, "rev-parse", "HEAD")
    if commit is None:
        return dict.fromkeys(("commit", "dirty", "diff_hash"), UNKNOWN)
    diff = _git(root, "diff", "HEAD", "--binary", text=False) or b""
    untracked = (_git(root, "ls-files", "--others", "--exclude-standard", "-z") or "").split("\0")
    digest = hashlib.sha256(diff)
    for name in sorted(n for n in untracked if n):
        path = root / name
        digest.update(name.encode() + b"\0" + (path.read_bytes() if path.is_file() else b""))
    dirty = bool(diff) or any(untracked)
    return {
        "commit": commit.strip(),
        "dirty": dirty,
        "diff_hash": digest.hexdigest()[:16] if dirty else None,
    }


@functools.cache
def library_versions() -> dict[str, str]:
    """python and the installed versions of ``LIBRARIES`` (``unknown`` when not installed)."""
    found = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = UNKNOWN
    return found


def device_name(accelerator: str) -> str:
    """The GPU's name when ``accelerator`` runs on one, else the CPU's model."""
    if accelerator in ("gpu", "cuda", "auto"):
        import torch  # only here: reading a record's provenance needs no torch

        if torch.cuda.is_available():
            return "GPU: " + torch.cuda.get_device_name(0)
    return cpu_name()


@functools.cache
def cpu_name() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo, else what the platform says)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return "CPU: " + line.split(":", 1)[1].strip()
    return "CPU: " + (platform.processor() or platform.machine() or UNKNOWN)


def _git(root: Path, *args: str, text: bool = True) -> Any:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            timeout=_GIT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.decode(errors="replace") if text else done.stdout


def code_label(recorded: dict[str, Any] | None) -> str:
    """A recorded provenance's code version in a few words: ``commit 1a2b3c4``, with
    ``(dirty, diff 5d6e...)`` after it when it had uncommitted changes."""
    code = (recorded or {}).get("code") or {}
    commit = code.get("commit", UNKNOWN)
    if commit == UNKNOWN:
        return "code unknown"
    dirty = f" (dirty, diff {code.get('diff_hash')})" if code.get("dirty") is True else ""
    return f"commit {commit[:7]}{dirty}"


def same_code(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether two recorded provenances ran the same code (an unknown one matches none)."""
    first, second = code_label(a), code_label(b)
    return first == second and first != code_label(None)


def differing_runs(runs: Sequence[tuple[str, dict[str, Any] | None]]) -> str | None:
    """One line naming the runs (name, recorded provenance) whose code or library versions
    differ from the most common ones, with the values that differ; None when all agree."""
    known = [_signature(recorded) for _, recorded in runs if recorded]
    fields = [
        field
        for field in ("code", "python", *LIBRARIES)
        if len({signature[field] for signature in known}) > 1
    ]
    groups: dict[str, list[str]] = {}
    for name, recorded in runs:
        signature = _signature(recorded) if recorded else None
        shown = (
            ", ".join(_shown(field, signature[field]) for field in fields or ["code"])
            if signature
            else NOT_RECORDED
        )
        groups.setdefault(shown, []).append(name)
    if len(groups) < 2:
        return None
    common, majority = max(groups.items(), key=lambda item: len(item[1]))
    others = "; ".join(
        f"{_runs(names)} ({versions})" for versions, names in groups.items() if versions != common
    )
    return (
        f"runs differ in code or library versions: {others}; the other {len(majority)} "
        f"({common}). Their numbers may not compare."
    )


def _signature(recorded: dict[str, Any]) -> dict[str, str]:
    versions = recorded.get("versions") or {}
    return {
        "code": code_label(recorded),
        **{name: str(versions.get(name, UNKNOWN)) for name in ("python", *LIBRARIES)},
    }


def _shown(field: str, value: str) -> str:
    return value if field == "code" else f"{field} {value}"


def _runs(names: Sequence[str]) -> str:
    return f"run {names[0]}" if len(names) == 1 else f"runs {', '.join(names)}"
