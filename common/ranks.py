"""Which process of a distributed run this is: the one place tinylm asks."""

from __future__ import annotations

import os

import torch.distributed as dist

# Set by the launchers before any process group exists: torchrun and Lightning's DDP
# children, SLURM tasks, LSF's jsrun (the variables Lightning itself reads, in its order).
_RANK_VARIABLES = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")


def rank_and_world_size() -> tuple[int, int]:
    """The process group's rank and size, (0, 1) without one: how data is sharded."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def global_rank() -> int:
    """This process's rank, known before the Trainer exists (DDP children, SLURM tasks):
    the process group's, else the launcher's environment, else 0. Rank 0 writes what a run
    writes once and says what it says once."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    for name in _RANK_VARIABLES:
        if name in os.environ:
            return int(os.environ[name])
    return 0
