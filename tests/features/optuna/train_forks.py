"""``python train.py ARGS`` as real processes that start in a moment: forked from one server
process (multiprocessing's forkserver) that imported tinylm, Lightning, Hydra and Optuna once.

A test can run several at once (the workers of one search), kill one with SIGKILL mid-trial,
and read what each printed; each costs its own work, not the ~8 s of a fresh interpreter's
imports nor the first run's warm-up (``tests/fork_server_warmup.py``).
"""

from __future__ import annotations

import multiprocessing
import os
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PRELOADED = [
    *("train", "modes.train", "modes.sweep", "features.optuna.sweeper", "features.optuna.study"),
    *(
        "features.optuna.search",
        "features.optuna.pruning",
        "analysis.sweep_summary",
        "modes.report",
    ),
    "tests.fork_server_warmup",  # last: a tiny training run, on one thread
]
_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(PRELOADED)


def start(*args: str, cwd: Path, log: Path) -> multiprocessing.Process:
    """``train.py ARGS`` run from ``cwd`` in a forked process, its output in ``log``."""
    process = _CONTEXT.Process(target=_train_py, args=(list(args), str(cwd), str(log)))
    process.start()
    return process


def finish(process: multiprocessing.Process, timeout: float = 300) -> int:
    """Wait for ``process`` and return its exit code (killed if it outlives ``timeout``)."""
    process.join(timeout)
    if process.is_alive():
        process.kill()
        process.join()
    return process.exitcode


def _train_py(args: list[str], cwd: str, log: str) -> None:
    """In the forked process: train.py as ``__main__``, as the shell would run it."""
    descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(descriptor, 1)
    os.dup2(descriptor, 2)
    os.chdir(cwd)
    sys.argv = [str(ROOT / "train.py"), *args]
    code = 0
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)  # no interpreter teardown: the launcher's pools may hang in it
