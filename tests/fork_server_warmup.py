"""Imported by the fork servers (``tests/fork_server.py``'s and the search tests'
``train_forks.py``'s) after tinylm: one tiny training run there, so that each process forked
from them skips the costs of a process's first run (the CPU kernels' first calls, Python's type
caches): a tiny run's child took 2.1 s from a cold server, 1.25 s from a warm one. The server
runs it on one thread and keeps that setting: OpenMP never starts a thread pool in it, so
nothing of one is left half-copied in its forks (which set their own thread count).
"""

from __future__ import annotations

import contextlib
import io
import tempfile

import torch

from tests.conftest import TINY, compose_config
from train import run

torch.set_num_threads(1)
with (
    tempfile.TemporaryDirectory() as scratch,
    contextlib.redirect_stdout(io.StringIO()),
    contextlib.redirect_stderr(io.StringIO()),
):
    run(
        compose_config(
            f"output_dir={scratch}/run",
            *(a for a in TINY if a.startswith("optim.lr=")),
            "trainer.max_steps=2",
            "trainer.val_check_interval=2",
            "trainer.limit_val_batches=1",
        )
    )
