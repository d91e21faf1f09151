"""Every use of a library's private name, in one place: each function says what it relies on
and why nothing public serves, and imports its library only when called.
``tests/common/test_library_private.py`` pins each behaviour and keeps private names out of the
rest of the code.
"""

from __future__ import annotations

import argparse
from typing import Any


def hydra_argument_parser() -> argparse.ArgumentParser:
    """The argument parser ``hydra.main`` reads ``sys.argv`` with, to split a command line as
    Hydra will. Relies on ``hydra._internal.utils.get_args_parser``: Hydra exports no public
    way to get it, and a copy of its flags would drift from Hydra's own."""
    from hydra._internal.utils import get_args_parser

    return get_args_parser()


def mark_sigterm_received(trainer: Any) -> None:
    """Make ``trainer`` stop as after a SIGTERM (``SIGTERMException`` at its loops' next
    check). Relies on ``trainer._signal_connector.received_sigterm``, which the public
    ``Trainer.received_sigterm`` only reads (``should_stop`` ends training without the
    exception, and so without the save-on-interrupt path)."""
    trainer._signal_connector.received_sigterm = True


def drop_wandb_init_argument(logger: Any, name: str) -> None:
    """Leave ``name`` out of the keyword arguments ``WandbLogger`` passes to ``wandb.init``.
    Relies on ``WandbLogger._wandb_init``: the logger always adds some of its own
    (``anonymous``, even when None) and has no public way to leave one out."""
    logger._wandb_init.pop(name, None)


def let_grad_scaler_unscale(optimizer: Any) -> None:
    """Make a GradScaler (and Lightning's mixed-precision clipping) unscale ``optimizer``'s
    gradients before its step instead of leaving it to a fused step. Relies on the
    ``_step_supports_amp_scaling`` attribute that torch's fused optimisers set and
    ``GradScaler`` and ``MixedPrecision`` read: torch has no public switch for it."""
    optimizer._step_supports_amp_scaling = False


def cpu_bf16_flags() -> bool:
    """Whether this CPU has AVX-512 BF16 or AMX tile instructions, for a torch without the
    public ``torch.cpu.get_capabilities`` (torch>=2.4 need not have it). Relies on
    ``torch.cpu._is_avx512_bf16_supported`` and ``_is_amx_tile_supported``: the older public
    ``get_cpu_capability()`` names the vector width, not these features."""
    import torch

    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def inductor_cpp_compiler() -> str | None:
    """The C++ compiler inductor would build its CPU kernels with, or None when there is none.
    Relies on ``torch._inductor.cpp_builder.get_cpp_compiler`` and ``InvalidCxxCompiler``:
    torch has no public way to ask, and a search of our own would disagree with inductor's."""
    from torch._inductor import cpp_builder, exc

    try:
        return cpp_builder.get_cpp_compiler()
    except exc.InvalidCxxCompiler:
        return None


def dataset_file_builders() -> frozenset[str]:
    """The ``datasets`` library's own file builders (``json``, ``csv``, ...): a
    ``load_dataset`` path among them reads local files, any other is a Hub dataset. Relies on
    ``datasets.packaged_modules._PACKAGED_DATASETS_MODULES``, the mapping ``load_dataset``
    decides by: the library exports no public list of them."""
    from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES

    return frozenset(_PACKAGED_DATASETS_MODULES)
