"""Every use of a library's private name (Hydra, Lightning, torch, datasets), in one place.

Each function here does one thing that its library offers no public way to do, says what it
relies on and why nothing public serves, and imports the library only when called (importing
this module loads nothing). ``tests/common/test_library_private.py`` pins the behaviour each relies
on, so a library release that changes it fails there, by name, rather than somewhere in a
run; and it scans the product code so that no private name of these libraries is used
anywhere else.
"""

from __future__ import annotations

import argparse
from typing import Any


def hydra_argument_parser() -> argparse.ArgumentParser:
    """The argument parser ``hydra.main`` reads ``sys.argv`` with (its flags and the
    overrides), so the command line is split here exactly as Hydra will split it.

    Relies on ``hydra._internal.utils.get_args_parser``: Hydra builds the parser there and
    exports no public way to get it; a copy of its flags would drift from Hydra's own."""
    from hydra._internal.utils import get_args_parser

    return get_args_parser()


def mark_sigterm_received(trainer: Any) -> None:
    """Make ``trainer`` stop as after a SIGTERM (Lightning's ``SIGTERMException`` at its
    loops' next check), as Lightning's own SIGTERM handler does.

    Relies on ``trainer._signal_connector.received_sigterm``, the flag that handler sets and
    that the public ``Trainer.received_sigterm`` property only reads: Lightning has no public
    way to set it (``trainer.should_stop`` ends training without the exception, and so without
    the save-on-interrupt path)."""
    trainer._signal_connector.received_sigterm = True


def drop_wandb_init_argument(logger: Any, name: str) -> None:
    """Leave ``name`` out of the keyword arguments Lightning's ``WandbLogger`` passes to
    ``wandb.init`` (a no-op when it passes none of that name).

    Relies on ``WandbLogger._wandb_init``, the dict of those arguments: the logger always
    adds some of its own (``anonymous``, even when None), and takes extra ones as keyword
    arguments, but has no public way to leave one of its own out."""
    logger._wandb_init.pop(name, None)


def let_grad_scaler_unscale(optimizer: Any) -> None:
    """Make a GradScaler (and Lightning's mixed-precision clipping) treat ``optimizer`` as any
    other: the scaler unscales the gradients before the step, instead of leaving it to a
    fused step.

    Relies on the ``_step_supports_amp_scaling`` attribute that torch's fused optimisers set
    and that ``torch.amp.GradScaler`` and Lightning's ``MixedPrecision`` read: torch has no
    public switch for it."""
    optimizer._step_supports_amp_scaling = False


def cpu_bf16_flags() -> bool:
    """Whether this CPU has AVX-512 BF16 or AMX tile instructions, for a torch without the
    public ``torch.cpu.get_capabilities`` (recent releases have it; the torch>=2.4 that
    tinylm supports need not).

    Relies on ``torch.cpu._is_avx512_bf16_supported`` and ``_is_amx_tile_supported``: before
    ``get_capabilities``, torch's only public CPU query was ``torch.backends.cpu.
    get_cpu_capability()``, which names the vector width (AVX512) and not these features."""
    import torch

    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def inductor_cpp_compiler() -> str | None:
    """The C++ compiler inductor would build its CPU kernels with (``$CXX``, else its
    configured one, g++), or None when there is none.

    Relies on ``torch._inductor.cpp_builder.get_cpp_compiler`` and its
    ``torch._inductor.exc.InvalidCxxCompiler``: torch has no public way to ask which compiler
    ``torch.compile`` will use, and a search of our own would disagree with inductor's (its
    config, its checks of the compiler it finds)."""
    from torch._inductor import cpp_builder, exc

    try:
        return cpp_builder.get_cpp_compiler()
    except exc.InvalidCxxCompiler:
        return None


def dataset_file_builders() -> frozenset[str]:
    """The names of the ``datasets`` library's own file builders (``json``, ``csv``,
    ``parquet``, ``text``, ...): a ``load_dataset`` path among them reads local files, any
    other name is a Hugging Face Hub dataset.

    Relies on ``datasets.packaged_modules._PACKAGED_DATASETS_MODULES``, the mapping
    ``load_dataset`` itself decides by: the library exports no public list of them (the
    package's submodules include helpers that are no builders)."""
    from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES

    return frozenset(_PACKAGED_DATASETS_MODULES)
