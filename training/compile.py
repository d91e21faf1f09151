"""``trainer.compile=true``: the network under ``torch.compile`` (inductor)."""

from __future__ import annotations

from torch import nn

from common.provenance import compile_fallback


def compile_network(network: nn.Module) -> str | None:
    """Compile ``network`` in place (``nn.Module.compile``: the state-dict keys stay its own, no
    ``_orig_mod.``, so checkpoints load compiled or not); else the note saying why not (the
    run's provenance records the same fallback, ``common.provenance.compile_used``)."""
    note = compile_fallback()
    if note is not None:
        return note
    network.compile()
    return None
