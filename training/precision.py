"""The precision a job runs in: ``trainer=cpu``'s ``bf16-mixed`` where the CPU runs bfloat16
natively (docs/benchmarks.md: 1.4x faster), ``32-true`` where it would only emulate it, slower
than float32. A ``trainer.precision`` typed on the command line is kept. ``16-mixed`` on a CPU
found by ``trainer.accelerator=auto`` is refused, as ``conf/`` refuses it with ``cpu``: Lightning
would train in ``bf16-mixed`` instead, other numbers than those asked for and recorded. On a
GPU, a precision or device where SDPA's flash kernel cannot run is said in one warning (the
run's provenance records the kernel, ``common.provenance.attention_kernel``), and so is
``trainer.compile=true`` where inductor cannot run (``training.compile.with_compile``).
"""

from __future__ import annotations

import sys
from dataclasses import replace

import torch

from common.library_private import cpu_bf16_flags
from common.provenance import attention_kernel, effective_accelerator
from common.ranks import global_rank
from conf.schema import Settings
from training.compile import with_compile


def native_bf16_cpu() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (AVX-512 BF16 or AMX tiles)."""
    capabilities = getattr(torch.cpu, "get_capabilities", None)  # public in recent torch
    if capabilities is None:
        return cpu_bf16_flags()
    found = capabilities()
    return bool(found.get("avx512_bf16", False) or found.get("amx_tile", False))


def _on_cpu(accelerator: str) -> bool:
    return effective_accelerator(accelerator) == "cpu"


def with_native_precision(settings: Settings) -> tuple[Settings, str | None]:
    """``settings`` with a preset's ``bf16-mixed`` turned into ``32-true`` on a CPU without
    native bfloat16, and the note that says so (None when nothing changed); ``16-mixed`` on a
    CPU is a ValueError."""
    trainer = settings.trainer
    if trainer.precision == "16-mixed" and _on_cpu(trainer.accelerator):
        raise ValueError(
            f"trainer.precision=16-mixed (float16 with a gradient scaler) needs a GPU, and "
            f"trainer.accelerator={trainer.accelerator} found none; on the CPU use "
            "trainer.precision=bf16-mixed or 32-true, or give trainer.accelerator=gpu on a "
            "machine with one"
        )
    if (
        trainer.precision != "bf16-mixed"
        or "trainer.precision" in settings.overrides
        or not _on_cpu(trainer.accelerator)
        or native_bf16_cpu()
    ):
        return settings, None
    note = (
        "this CPU has no native bfloat16 (AVX-512 BF16 or AMX), where trainer.precision="
        "bf16-mixed runs slower than float32: running in 32-true (give trainer.precision="
        "bf16-mixed on the command line to keep it)"
    )
    return replace(settings, trainer=replace(trainer, precision="32-true")), note


def native_precision(settings: Settings) -> Settings:
    """The settings this machine runs (``with_native_precision``'s, then ``with_compile``'s),
    each fallback's note printed (rank 0) as a warning, with the one of an attention kernel
    that falls back from flash on a GPU."""
    settings, note = with_native_precision(settings)
    settings, compile_note = with_compile(settings)
    trainer = settings.trainer
    used = effective_accelerator(trainer.accelerator)
    attention_note = attention_kernel(used, trainer.precision)[1]
    for line in (note, compile_note, attention_note):
        if line and global_rank() == 0:
            print(f"tinylm: warning: {line}", file=sys.stderr)
    return settings
