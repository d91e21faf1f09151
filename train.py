"""tinylm's single entry point, ``python train.py [mode=NAME] [KEY=VALUE ...]``: ``main`` is
the Hydra wrapper, ``execute`` its exit policy, ``run`` the job (tests call both directly)."""

from __future__ import annotations

import os
import re
import sys
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

import modes
from common.provenance import provenance
from conf.command_line import check_command_line
from conf.features import comma_lists
from conf.hydra_runtime import job_overrides, parse_settings, sweep_dir

# Quiet, offline-safe defaults; the environment can still override each one.
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The checkout is the application (nothing of it is installed): the processes a launcher
# starts to run a job (submitit's, here or on a SLURM node) import it from here, as this one.
_ROOT = str(Path(__file__).resolve().parent)
if _ROOT not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_ROOT, os.environ.get("PYTHONPATH")]))
warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
warnings.filterwarnings("ignore", message=r".*LeafSpec.*")

# Errors that mean "the input is wrong": one line for the user, no traceback (TINYLM_DEBUG=1
# shows it). ConnectionError: a Hub dataset or tokenizer while offline; the message says what
# to do instead.
USER_ERRORS = (
    ValueError,
    FileNotFoundError,
    FileExistsError,
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
    if settings.parallel_jobs > 1:
        # Jobs of a parallel sweep share the cores instead of each taking all of them.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // settings.parallel_jobs))
    return mode(settings, callbacks)


def execute(cfg: DictConfig, callbacks: Sequence[Any] = ()) -> float | None:
    """``run`` under tinylm's exit policy, returning the best validation loss for Hydra's
    sweepers; under a multirun, a failing job is recorded as failed and the sweep goes on."""
    try:
        metrics = run(cfg, callbacks)
    except modes.Interrupted as err:
        # Not a failed job: the user (or the scheduler) stops the run, and the sweep with it.
        from common.ranks import global_rank  # torch is loaded already: training was under way

        if global_rank() == 0:  # one line, not one per DDP rank
            print(f"tinylm: {err}", file=sys.stderr)
        raise SystemExit(err.exit_code) from None
    except modes.SweepConflict as err:
        # Stops the whole sweep: recording it as this job's failure would overwrite the
        # earlier run's results.
        print(f"tinylm: error: {err}", file=sys.stderr)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        print("tinylm: interrupted before training started; nothing to save", file=sys.stderr)
        raise SystemExit(130) from None
    except Exception as err:
        if sweep_dir() is not None:
            _record_failure(cfg, err)
            return None
        exit_on_user_error(err)
        raise
    return metrics.get("best_val_loss")


def exit_on_user_error(err: Exception) -> None:
    """A user error (``USER_ERRORS``) prints one line and exits 1; TINYLM_DEBUG=1 keeps it for
    the caller to re-raise, with its traceback."""
    if isinstance(err, USER_ERRORS) and not os.environ.get("TINYLM_DEBUG"):
        print(f"tinylm: error: {err}", file=sys.stderr)
        raise SystemExit(1) from None


def check_arguments(args: Sequence[str]) -> None:
    """``check_command_line`` under the exit policy: a sweep with a mistyped key starts no job."""
    try:
        check_command_line(args)
    except ValueError as err:
        exit_on_user_error(err)
        raise


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    return execute(cfg)


# One Hydra quoted string: a quote, escaped or other characters, the same quote.
_HYDRA_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", re.DOTALL)


def verbatim_prompt(args: Sequence[str]) -> list[str]:
    """Command-line arguments with ``prompt=TEXT`` rewritten as Hydra's quoted string of TEXT,
    so that free text (brackets, commas, ``=``, quotes, ``${``) reads as typed rather than as
    Hydra's override grammar. A value already quoted whole is left to Hydra."""
    return [_quote_prompt(arg) if arg.startswith("prompt=") else arg for arg in args]


def _quote_prompt(arg: str) -> str:
    text = arg.removeprefix("prompt=")
    if _HYDRA_QUOTED.fullmatch(text):
        return arg
    # Inside a quoted Hydra value a backslash is literal unless it precedes a quote, an
    # escaped interpolation or the closing quote: only those runs are doubled.
    text = re.sub(r"(\\+)(?='|\$\{|\Z)", lambda m: m.group(1) * 2, text)
    text = text.replace("'", "\\'").replace("${", "\\${")  # a quote; no interpolation
    return f"prompt='{text}'"


def _record_failure(cfg: DictConfig, err: Exception) -> None:
    """A failed sweep job: its traceback on stderr, ``status: failed`` in its record."""
    from analysis.run_record import Status, run_record, write_record

    traceback.print_exc()
    message = str(err) if isinstance(err, USER_ERRORS) else f"{type(err).__name__}: {err}"
    print(f"tinylm: this job failed, the sweep goes on: {message}", file=sys.stderr)
    trainer = cfg.get("trainer", {})
    failure = run_record(
        Status.FAILED,
        error=message,
        overrides=job_overrides(),
        # the configured precision and compile: the job may have failed before choosing the
        # ones it ran with
        provenance=provenance(
            trainer.get("precision"),
            trainer.get("accelerator", "cpu"),
            compiled=bool(trainer.get("compile", False)),
        ),
    )
    write_record(Path(cfg.output_dir), failure)
    if "wandb" in sys.modules:
        import wandb

        if wandb.run is not None:
            wandb.finish(exit_code=1)


if __name__ == "__main__":
    sys.argv[1:] = comma_lists(verbatim_prompt(sys.argv[1:]))
    check_arguments(sys.argv[1:])
    main()
