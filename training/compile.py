"""``trainer.compile=true``: the network under ``torch.compile`` (inductor)."""

from __future__ import annotations

from torch import nn

from common.library_private import inductor_cpp_compiler


def compile_network(network: nn.Module) -> str | None:
    """Compile ``network`` in place (``nn.Module.compile``: the state-dict keys stay its own, no
    ``_orig_mod.``, so checkpoints load compiled or not); else the note saying why not."""
    if inductor_cpp_compiler() is None:
        return (
            "trainer.compile=true needs a C++ compiler for torch.compile's inductor backend and "
            "found none (g++, or the one $CXX names); training without compiling"
        )
    network.compile()
    return None
