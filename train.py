"""tinylm's single entry point: ``python train.py [mode=train|eval|generate|attention|export]``.

``main`` is the Hydra wrapper and ``execute`` its error and exit policy; ``run(cfg)`` validates
the configuration into ``Settings`` and hands it to the module of ``cfg.mode`` (``modes/``).
Tests call ``run`` and ``execute`` directly. The map of the code is ARCHITECTURE.md.
"""

from __future__ import annotations

import os
import sys
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

import modes
from conf.schema import job_overrides, parse_settings, sweep_dir

# Quiet, offline-safe defaults; the environment can still override each one.
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
warnings.filterwarnings("ignore", message=r".*LeafSpec.*")

# Errors that mean "the input is wrong": one line for the user, no traceback (TINYLM_DEBUG=1
# shows it). ConnectionError: a Hub dataset or tokenizer while offline; the message says what
# to do instead.
USER_ERRORS = (
    ValueError,
    FileNotFoundError,
    IsADirectoryError,
    FloatingPointError,
    ConnectionError,
)


def run(cfg: DictConfig, callbacks: Sequence[Any] = ()) -> dict[str, Any]:
    """Run the job ``cfg.mode`` describes and return its results. ``callbacks`` are extra
    Lightning callbacks for the modes that run a Trainer (tests inject faults with them)."""
    mode = modes.find(str(cfg.mode))
    settings = parse_settings(cfg)
    import torch

    # Subnormal floats are 10-100x slower on x86 CPUs, and training makes many: softmax
    # gradients and Adam moments of tokens the model never predicts. Flushing them to zero
    # took the shakespeare_char preset from 569 s to 86 s at the same validation loss.
    torch.set_flush_denormal(True)
    return mode(settings, callbacks)


def execute(cfg: DictConfig, callbacks: Sequence[Any] = ()) -> float | None:
    """``run`` under tinylm's exit policy; returns the best validation loss (Hydra sweepers
    may read it). A user error prints one clear message and exits 1; an interruption exits
    130/143; under a multirun, a failing job is recorded as failed and the sweep goes on."""
    try:
        metrics = run(cfg, callbacks)
    except modes.Interrupted as err:
        # Not a failed job: the user (or the scheduler) stops the run, and the sweep with it.
        from training.trainer import global_rank  # loaded already: training was under way

        if global_rank() == 0:  # one line, not one per DDP rank
            print(f"tinylm: {err}", file=sys.stderr)
        raise SystemExit(err.exit_code) from None
    except KeyboardInterrupt:
        print("tinylm: interrupted before training started; nothing to save", file=sys.stderr)
        raise SystemExit(130) from None
    except Exception as err:
        if sweep_dir() is not None:
            _record_failure(cfg, err)
            return None
        if isinstance(err, USER_ERRORS) and not os.environ.get("TINYLM_DEBUG"):
            print(f"tinylm: error: {err}", file=sys.stderr)
            raise SystemExit(1) from None
        raise
    return metrics.get("best_val_loss")


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    return execute(cfg)


def _record_failure(cfg: DictConfig, err: Exception) -> None:
    """A failed sweep job: its traceback on stderr, ``status: failed`` in its metrics.json."""
    from modes.report import write_metrics

    traceback.print_exc()
    message = str(err) if isinstance(err, USER_ERRORS) else f"{type(err).__name__}: {err}"
    print(f"tinylm: this job failed, the sweep goes on: {message}", file=sys.stderr)
    failure = {"status": "failed", "error": message, "overrides": job_overrides()}
    write_metrics(Path(cfg.output_dir), failure)
    if "wandb" in sys.modules:
        import wandb

        if wandb.run is not None:
            wandb.finish(exit_code=1)


if __name__ == "__main__":
    main()
