"""``trainer.compile=true``: the network under ``torch.compile`` (inductor), or eager with a
note where inductor cannot build its kernels.

The network (``task.model``, not the LightningModule) is compiled in place
(``nn.Module.compile``): its parameters, their names and so the checkpoints' state-dict keys
stay the module's own (no ``_orig_mod.`` prefix), so a compiled run's checkpoint loads into an
eager network and an eager run's resumes compiled.
"""

from __future__ import annotations

from torch import nn

from common.library_private import inductor_cpp_compiler


def compile_network(network: nn.Module) -> str | None:
    """Compile ``network``'s forward in place with inductor; returns None, or the one-line
    note saying why it stays eager."""
    if inductor_cpp_compiler() is None:
        return (
            "trainer.compile=true needs a C++ compiler for torch.compile's inductor backend and "
            "found none (g++, or the one $CXX names); training without compiling"
        )
    network.compile()
    return None
