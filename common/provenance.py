"""What produced a result: the code version, the library versions, the device, the precision
and the command line, recorded in every run's record and every evaluation record; and the
settings in effect on this machine where they may differ from those asked for (the accelerator
``auto`` picked, torch.compile or its fallback, the attention kernel, torch's threads, the
deterministic mode)."""

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
NOT_INSTALLED = "not installed"  # a library's version where it is missing
NOT_RECORDED = "no provenance recorded"  # a run from before provenance existed
LIBRARIES = ("torch", "lightning", "tokenizers", "datasets", "transformers")
# The checkout whose code ran: the directory above common/.
CODE_ROOT = Path(__file__).resolve().parents[1]
_GIT_SECONDS = 20  # a git command that takes longer (a hung mount) leaves the version unknown


def provenance(
    precision: str | None, accelerator: str = "cpu", *, compiled: bool = False
) -> dict[str, Any]:
    """This process's provenance, with the ``precision`` used, on the device ``accelerator``
    resolves to; ``compiled``: the network runs under torch.compile (mode=train's
    ``trainer.compile`` once this machine's fallback is applied). Only writers call it: a
    record is read as JSON."""
    used = effective_accelerator(accelerator)
    return {
        "code": code_version(),
        "versions": library_versions(),
        "device": device_name(used),
        "precision": precision or UNKNOWN,
        "command": shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else UNKNOWN,
        **effective_settings(used, precision, compiled),
    }


def effective_settings(accelerator: str, precision: str | None, compiled: bool) -> dict[str, Any]:
    """What this process runs with, where the machine decides: ``accelerator`` (resolved by
    ``effective_accelerator``), torch's intra-op threads, whether torch's deterministic
    algorithms are on (``trainer.deterministic``: Lightning's Trainer sets them), torch.compile
    and the attention kernel."""
    import torch  # only here: reading a record's provenance needs no torch

    return {
        "accelerator": accelerator,
        "threads": torch.get_num_threads(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "compile": compile_used(compiled),
        "attention": attention_kernel(accelerator, precision)[0],
    }


def effective_accelerator(accelerator: str) -> str:
    """The device kind a Lightning ``accelerator`` runs on: ``cpu``, ``gpu`` (CUDA) or ``mps``;
    ``auto`` as Lightning resolves it (a CUDA GPU, else Apple's MPS, else the CPU). Another
    name (``tpu``) is returned as given."""
    if accelerator not in ("auto", "gpu", "cuda", "mps"):
        return accelerator
    import torch

    if accelerator != "mps" and torch.cuda.is_available():
        return "gpu"
    if accelerator in ("auto", "gpu", "mps") and torch.backends.mps.is_available():
        return "mps"
    return "cpu" if accelerator == "auto" else accelerator.replace("cuda", "gpu")


def compile_used(compiled: bool) -> str:
    """``inductor`` when the network runs compiled, else ``off`` (``trainer.compile=true``
    without a C++ compiler is turned off as the job starts, with a warning:
    ``training.compile.with_compile``)."""
    return "inductor" if compiled else "off"


# The dtype each precision computes attention in; flash runs only in float16 and bfloat16.
_HALF = {
    "bf16-mixed": "bfloat16",
    "bf16-true": "bfloat16",
    "16-mixed": "float16",
    "16-true": "float16",
}
FLASH = "sdpa: flash for unmasked calls"


@functools.cache
def attention_kernel(accelerator: str, precision: str | None) -> tuple[str, str | None]:
    """The kernel ``scaled_dot_product_attention`` has for a run on ``accelerator`` (resolved)
    in ``precision`` where it is given no mask tensor (a decoder without padding; a mask takes
    the memory-efficient kernel, docs/data.md), and the note when a GPU's flash kernel, which
    ``trainer=gpu`` counts on, cannot run (None otherwise). On a CPU torch picks among its CPU
    kernels and no flash kernel is asked for."""
    if accelerator != "gpu":
        return f"sdpa: {accelerator}", None
    if precision is None:
        return UNKNOWN, None  # a failed job's record: the precision was never chosen
    import torch

    without = "attention runs in SDPA's memory-efficient or math kernel, slower"
    dtype = _HALF.get(precision)
    if dtype is None:
        return "sdpa: no flash (float32 or wider)", (
            f"trainer.precision={precision}: SDPA's flash kernel needs float16 or bfloat16, so "
            f"{without} (trainer.precision=bf16-mixed uses it)"
        )
    if not torch.cuda.is_available():
        return UNKNOWN, None  # trainer.accelerator=gpu without one: Lightning refuses it
    if not torch.backends.cuda.flash_sdp_enabled():
        return "sdpa: no flash (disabled)", (
            f"torch.backends.cuda.enable_flash_sdp(False) was called: {without}"
        )
    try:
        usable = flash_runs(dtype)
    except (RuntimeError, TypeError) as err:  # a broken CUDA context, another torch's signature
        return UNKNOWN, f"whether SDPA's flash kernel runs here could not be told ({err})"
    if usable:
        return FLASH, None
    return "sdpa: no flash (this GPU or torch build)", (
        f"{device_name('gpu')} (or this torch build) has no flash kernel for SDPA in {dtype}: "
        f"{without}"
    )


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
    """python and the installed versions of ``LIBRARIES`` (``not installed`` for a missing
    one)."""
    found = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = NOT_INSTALLED
    return found


def flash_runs(dtype: str) -> bool:
    """Whether SDPA's flash kernel runs on this process's CUDA device in ``dtype`` (a causal,
    unmasked call at a common head size, 64): what the device and this torch build allow."""
    import torch

    probe = torch.zeros(1, 1, 8, 64, device="cuda", dtype=getattr(torch, dtype))
    params = torch.backends.cuda.SDPAParams(probe, probe, probe, None, 0.0, True, False)
    return torch.backends.cuda.can_use_flash_attention(params)


def recorded_versions(recorded: dict[str, Any] | None) -> dict[str, str]:
    """The library versions of a recorded provenance, a missing library named ``not
    installed``: records written before that word say ``unknown`` for it (the only case in
    which ``library_versions`` wrote it)."""
    versions = (recorded or {}).get("versions") or {}
    return {
        str(name): NOT_INSTALLED if value == UNKNOWN else str(value)
        for name, value in versions.items()
    }


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


# What a run ran on, named when a sweep's runs differ in it: a sweep varies its overrides, not
# the machine, and another device or thread count moves the numbers' last bits (the precision
# is left out: a sweep may vary it on purpose, and the CPU that decides a preset's is named).
MACHINE = ("device", "accelerator", "threads")


def differing_runs(runs: Sequence[tuple[str, dict[str, Any] | None]]) -> str | None:
    """One line naming the runs (name, recorded provenance) whose code, library versions or
    machine (``MACHINE``; compared among the runs that recorded it) differ from the most
    common ones, with the values that differ; None when all agree."""
    known = [_signature(recorded) for _, recorded in runs if recorded]
    fields = [
        field
        for field in ("code", "python", *LIBRARIES, *MACHINE)
        if len({signature[field] for signature in known} - {None}) > 1
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
    machine = any(field in MACHINE for field in fields)
    code = not machine or any(field not in MACHINE for field in fields)
    what = " and ".join(
        kind
        for kind, differs in (
            ("code or library versions", code),
            ("the machine they ran on", machine),
        )
        if differs
    )
    return (
        f"runs differ in {what}: {others}; the other {len(majority)} "
        f"({common}). Their numbers may not compare."
    )


def _signature(recorded: dict[str, Any]) -> dict[str, str | None]:
    versions = recorded_versions(recorded)
    return {
        "code": code_label(recorded),
        **{name: str(versions.get(name, UNKNOWN)) for name in ("python", *LIBRARIES)},
        # None where a record from before the field was recorded lacks it
        **{name: _text(recorded.get(name)) for name in MACHINE},
    }


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _shown(field: str, value: str | None) -> str:
    if value is None:
        return f"{field} {UNKNOWN}"
    return value if field in ("code", "device") else f"{field} {value}"


def _runs(names: Sequence[str]) -> str:
    return f"run {names[0]}" if len(names) == 1 else f"runs {', '.join(names)}"
