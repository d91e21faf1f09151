"""``trainer.compile=true``: the network under ``torch.compile`` (inductor), or the fallback to
eager where inductor cannot run, said once as the job starts and recorded."""

from __future__ import annotations

from dataclasses import replace

from torch import nn

from common.library_private import inductor_cpp_compiler
from conf.schema import Settings

# The one command that compiles its network (modes/train.py); the others ignore the setting.
COMPILING_MODES = ("train",)


def compile_fallback() -> str | None:
    """Why ``trainer.compile=true`` trains eager on this machine (one line), or None when
    torch.compile's inductor backend can run."""
    if inductor_cpp_compiler() is None:
        return (
            "trainer.compile=true needs a C++ compiler for torch.compile's inductor backend and "
            "found none (g++, or the one $CXX names); training without compiling"
        )
    return None


def with_compile(settings: Settings) -> tuple[Settings, str | None]:
    """``settings`` with ``trainer.compile`` turned off where a compiling mode cannot compile
    here, and the note that says so (None when nothing changed): the setting then holds what
    runs, and the run's provenance records it."""
    if not settings.trainer.compile or settings.job.mode not in COMPILING_MODES:
        return settings, None
    note = compile_fallback()
    if note is None:
        return settings, None
    return replace(settings, trainer=replace(settings.trainer, compile=False)), note


def compile_network(network: nn.Module) -> str | None:
    """Compile ``network`` in place (``nn.Module.compile``: the state-dict keys stay its own, no
    ``_orig_mod.``, so checkpoints load compiled or not); else the note saying why not."""
    note = compile_fallback()
    if note is not None:
        return note
    network.compile()
    return None
